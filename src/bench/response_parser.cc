#include "bench/response_parser.h"

#include <nlohmann/json.hpp>

namespace tokenmill::bench {
namespace {

using nlohmann::json;

// A count outside int64 (1e300, 2^64 - 1) is no count: converting it would
// be undefined (a float) or wrap (an unsigned), so it gives the fallback.
int64_t int_or(const json& j, const char* key, int64_t fallback) {
  if (!j.is_object() || !j.contains(key) || !j[key].is_number()) return fallback;
  const json& v = j[key];
  if (v.is_number_float()) {
    const double d = v.get<double>();
    constexpr double kTwoTo63 = 9223372036854775808.0;
    return d >= -kTwoTo63 && d < kTwoTo63 ? static_cast<int64_t>(d) : fallback;
  }
  if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t{INT64_MAX}) return fallback;
  return v.get<int64_t>();
}

double num_or(const json& j, const char* key, double fallback) {
  if (!j.is_object() || !j.contains(key) || !j[key].is_number()) return fallback;
  return j[key].get<double>();
}

void read_choice(const json& choice, ResponsePiece& p) {
  if (!choice.is_object()) return;
  p.has_choice = true;
  if (choice.contains("text") && choice["text"].is_string()) {
    p.text_bytes += static_cast<int64_t>(choice["text"].get_ref<const std::string&>().size());
  }
  for (const char* holder : {"delta", "message"}) {
    if (!choice.contains(holder) || !choice[holder].is_object()) continue;
    const json& d = choice[holder];
    if (d.contains("content") && d["content"].is_string()) {
      p.text_bytes += static_cast<int64_t>(d["content"].get_ref<const std::string&>().size());
    }
  }
  if (choice.contains("finish_reason") && choice["finish_reason"].is_string()) {
    p.finish_reason = choice["finish_reason"].get<std::string>();
  }
}

void read_usage(const json& usage, ResponsePiece& p) {
  if (!usage.is_object()) return;
  p.prompt_tokens = int_or(usage, "prompt_tokens", p.prompt_tokens);
  p.completion_tokens = int_or(usage, "completion_tokens", p.completion_tokens);
  if (usage.contains("prompt_tokens_details")) {
    p.cached_tokens = int_or(usage["prompt_tokens_details"], "cached_tokens", p.cached_tokens);
  }
}

void read_timings(const json& t, ResponsePiece& p) {
  if (!t.is_object()) return;
  p.queue_ms = num_or(t, "queue_ms", p.queue_ms);
  p.prompt_ms = num_or(t, "prompt_ms", p.prompt_ms);
  p.server_ttft_ms = num_or(t, "ttft_ms", p.server_ttft_ms);
  p.draft_tokens = int_or(t, "draft_tokens", int_or(t, "draft_n", p.draft_tokens));
  p.accepted_draft_tokens = int_or(t, "accepted_draft_tokens", int_or(t, "draft_n_accepted", p.accepted_draft_tokens));
  if (p.cached_tokens < 0) {
    p.cached_tokens = int_or(t, "cached_prompt_tokens", int_or(t, "cached_tokens", int_or(t, "cache_n", -1)));
  }
  if (p.prompt_tokens < 0 && t.contains("cache_n") && t.contains("prompt_n")) {
    // llama.cpp: prompt_n counts only the tokens it had to compute. A sum
    // that overflows is left unknown.
    int64_t sum = 0;
    if (!__builtin_add_overflow(int_or(t, "prompt_n", 0), int_or(t, "cache_n", 0), &sum)) {
      p.prompt_tokens = sum;
    }
  }
}

}  // namespace

ResponsePiece parse_response_piece(const std::string& payload) {
  ResponsePiece p;
  if (payload == "[DONE]") {
    p.done = true;
    return p;
  }
  const json j = json::parse(payload, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    p.malformed = true;
    return p;
  }
  if (j.contains("error")) {
    const json& e = j["error"];
    if (e.is_string()) {
      p.error = e.get<std::string>();
    } else if (e.is_object() && e.contains("message") && e["message"].is_string()) {
      p.error = e["message"].get<std::string>();
    } else {
      p.error = e.dump();
    }
    if (p.error.empty()) p.error = "error";
    return p;
  }
  if (j.contains("choices") && j["choices"].is_array()) {
    for (const json& c : j["choices"]) read_choice(c, p);
  }
  if (j.contains("usage")) read_usage(j["usage"], p);
  if (j.contains("timings")) read_timings(j["timings"], p);
  if (!p.has_choice && !j.contains("usage") && !j.contains("timings")) p.malformed = true;
  return p;
}

}  // namespace tokenmill::bench
