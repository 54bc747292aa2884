#include "server/openai/openai_response.h"

#include <fmt/format.h>

#include <cmath>

#include "tokenizer/unicode.h"

namespace tokenmill::server {

using nlohmann::json;

json usage_json(const engine::Usage& u) {
  return {{"prompt_tokens", u.prompt_tokens},
          {"completion_tokens", u.completion_tokens},
          {"total_tokens", u.prompt_tokens + u.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", u.cached_prompt_tokens}}}};
}

json timings_json(const engine::Timings& t, const engine::Usage& u, const engine::SpecStats& spec) {
  // Decode speed over the tokens after the first (the first one belongs to
  // the prefill), as llama.cpp's server and benchmark tools count it.
  const double decode_tps = t.decode_ms > 0 && u.completion_tokens > 1
                                ? static_cast<double>(u.completion_tokens - 1) * 1000.0 / t.decode_ms
                                : 0.0;
  const double forward = t.forward_compute_ms + t.forward_comm_ms;
  return {{"queue_ms", t.queue_ms},
          {"prompt_ms", t.prefill_ms},
          {"ttft_ms", t.ttft_ms},
          {"decode_ms", t.decode_ms},
          {"tpot_ms", t.tpot_ms},
          {"e2e_ms", t.e2e_ms},
          {"decode_tokens_per_s", decode_tps},
          {"prompt_tokens", u.prompt_tokens},
          {"cached_prompt_tokens", u.cached_prompt_tokens},
          {"completion_tokens", u.completion_tokens},
          {"draft_tokens", spec.draft_tokens},
          {"accepted_draft_tokens", spec.accepted_tokens},
          {"forward_compute_ms", t.forward_compute_ms},
          {"forward_communication_ms", t.forward_comm_ms},
          {"communication_share", forward > 0 ? t.forward_comm_ms / forward : 0.0},
          {"context_compressed", t.kv_evicted_tokens > 0},
          {"kv_evicted_tokens", t.kv_evicted_tokens}};
}

std::string token_display(std::string_view piece) {
  if (tokenizer::is_valid_utf8(piece)) return std::string(piece);
  std::string out = "bytes:";
  for (unsigned char c : piece) out += fmt::format("\\x{:02x}", c);
  return out;
}

namespace {

json bytes_json(std::string_view piece) {
  json b = json::array();
  for (unsigned char c : piece) b.push_back(static_cast<int>(c));
  return b;
}

// JSON has no -inf: a banned token's logprob is reported as OpenAI's floor.
double finite_logprob(float lp) { return std::isfinite(lp) ? static_cast<double>(lp) : -9999.0; }

}  // namespace

json completion_logprobs_json(const std::vector<int32_t>& tokens, const std::vector<engine::TokenLogprob>& logprobs,
                              int64_t offset0, const TokenPieceFn& piece) {
  json toks = json::array(), lps = json::array(), tops = json::array(), offsets = json::array();
  int64_t offset = offset0;
  for (size_t i = 0; i < tokens.size() && i < logprobs.size(); ++i) {
    const std::string p = piece(tokens[i]);
    toks.push_back(token_display(p));
    lps.push_back(finite_logprob(logprobs[i].logprob));
    json top = json::object();
    for (const auto& [id, lp] : logprobs[i].top) top[token_display(piece(id))] = finite_logprob(lp);
    top.emplace(token_display(p), finite_logprob(logprobs[i].logprob));  // no-op when already there
    tops.push_back(std::move(top));
    offsets.push_back(offset);
    offset += static_cast<int64_t>(p.size());
  }
  return {{"tokens", toks}, {"token_logprobs", lps}, {"top_logprobs", tops}, {"text_offset", offsets}};
}

json prompt_logprobs_json(const std::vector<int32_t>& prompt, const std::vector<engine::TokenLogprob>& logprobs,
                          const TokenPieceFn& piece) {
  json toks = json::array(), lps = json::array(), tops = json::array(), offsets = json::array();
  int64_t offset = 0;
  for (size_t i = 0; i < prompt.size(); ++i) {
    const std::string p = piece(prompt[i]);
    toks.push_back(token_display(p));
    offsets.push_back(offset);
    offset += static_cast<int64_t>(p.size());
    if (i == 0 || i - 1 >= logprobs.size()) {  // the first token has no prefix to predict it from
      lps.push_back(nullptr);
      tops.push_back(nullptr);
      continue;
    }
    const engine::TokenLogprob& lp = logprobs[i - 1];
    lps.push_back(finite_logprob(lp.logprob));
    json top = json::object();
    for (const auto& [id, v] : lp.top) top[token_display(piece(id))] = finite_logprob(v);
    top.emplace(token_display(p), finite_logprob(lp.logprob));
    tops.push_back(std::move(top));
  }
  return {{"tokens", toks}, {"token_logprobs", lps}, {"top_logprobs", tops}, {"text_offset", offsets}};
}

int64_t pieces_size(const std::vector<int32_t>& tokens, const TokenPieceFn& piece) {
  int64_t n = 0;
  for (int32_t t : tokens) n += static_cast<int64_t>(piece(t).size());
  return n;
}

void append_logprobs_json(json& into, const json& more) {
  for (const char* key : {"tokens", "token_logprobs", "top_logprobs", "text_offset"})
    for (const json& v : more.at(key)) into[key].push_back(v);
}

json vllm_prompt_logprobs_json(const std::vector<int32_t>& prompt, const std::vector<engine::TokenLogprob>& logprobs,
                               int top, const TokenPieceFn& piece) {
  json out = json::array();
  for (size_t i = 0; i < prompt.size(); ++i) {
    if (i == 0 || i - 1 >= logprobs.size()) {
      out.push_back(nullptr);
      continue;
    }
    const engine::TokenLogprob& lp = logprobs[i - 1];
    json entry = json::object();
    auto add = [&](int32_t id, float logprob, int32_t rank) {
      const std::string key = std::to_string(id);
      if (entry.contains(key)) return;
      entry[key] = {{"logprob", finite_logprob(logprob)}, {"rank", rank}, {"decoded_token", token_display(piece(id))}};
    };
    add(prompt[i], lp.logprob, lp.rank);
    for (size_t k = 0; k < lp.top.size() && k < static_cast<size_t>(top); ++k)
      add(lp.top[k].first, lp.top[k].second, static_cast<int32_t>(k + 1));
    out.push_back(std::move(entry));
  }
  return out;
}

json chat_logprobs_json(const std::vector<int32_t>& tokens, const std::vector<engine::TokenLogprob>& logprobs,
                        const TokenPieceFn& piece) {
  json content = json::array();
  for (size_t i = 0; i < tokens.size() && i < logprobs.size(); ++i) {
    const std::string p = piece(tokens[i]);
    json top = json::array();
    for (const auto& [id, lp] : logprobs[i].top) {
      const std::string q = piece(id);
      top.push_back({{"token", token_display(q)}, {"logprob", finite_logprob(lp)}, {"bytes", bytes_json(q)}});
    }
    content.push_back({{"token", token_display(p)},
                       {"logprob", finite_logprob(logprobs[i].logprob)},
                       {"bytes", bytes_json(p)},
                       {"top_logprobs", std::move(top)}});
  }
  return {{"content", std::move(content)}, {"refusal", nullptr}};
}

json completion_response(const ResponseMeta& meta, const std::vector<ChoiceOutput>& choices, const json& usage,
                         const json& timings) {
  json cs = json::array();
  for (const ChoiceOutput& c : choices) {
    cs.push_back({{"index", c.index}, {"text", c.text}, {"logprobs", c.logprobs}, {"finish_reason", c.finish_reason}});
    if (!c.prompt_logprobs.is_null()) cs.back()["prompt_logprobs"] = c.prompt_logprobs;
  }
  return {{"id", meta.id},           {"object", "text_completion"},
          {"created", meta.created}, {"model", meta.model},
          {"choices", cs},           {"usage", usage},
          {"timings", timings},      {"system_fingerprint", nullptr}};
}

json tool_calls_json(const std::vector<ToolCallOutput>& calls, const std::vector<std::string>& ids) {
  json out = json::array();
  for (size_t i = 0; i < calls.size(); ++i) {
    out.push_back({{"id", ids[i]},
                   {"type", "function"},
                   {"function", {{"name", calls[i].name}, {"arguments", calls[i].arguments}}}});
  }
  return out;
}

json tool_delta_json(const ParsedOutput& piece, const std::vector<std::string>& ids) {
  json delta = json::object();
  if (!piece.content.empty()) delta["content"] = piece.content;
  if (!piece.reasoning.empty()) delta["reasoning_content"] = piece.reasoning;
  if (piece.calls.empty()) return delta;
  json calls = json::array();
  for (const ToolCallDelta& d : piece.calls) {
    json c = {{"index", d.index}};
    if (!d.name.empty()) {
      c["id"] = ids[static_cast<size_t>(d.index)];
      c["type"] = "function";
      c["function"] = {{"name", d.name}, {"arguments", d.arguments}};
    } else {
      c["function"] = {{"arguments", d.arguments}};
    }
    calls.push_back(std::move(c));
  }
  delta["tool_calls"] = std::move(calls);
  return delta;
}

json chat_response(const ResponseMeta& meta, const std::vector<ChoiceOutput>& choices, const json& usage,
                   const json& timings) {
  json cs = json::array();
  for (const ChoiceOutput& c : choices) {
    json message = {
        {"role", "assistant"}, {"content", c.null_content ? json(nullptr) : json(c.text)}, {"refusal", nullptr}};
    if (c.tool_calls.is_array() && !c.tool_calls.empty()) message["tool_calls"] = c.tool_calls;
    if (!c.reasoning.empty()) message["reasoning_content"] = c.reasoning;
    cs.push_back({{"index", c.index},
                  {"message", std::move(message)},
                  {"logprobs", c.logprobs},
                  {"finish_reason", c.finish_reason}});
  }
  json body = {{"id", meta.id},           {"object", "chat.completion"},
               {"created", meta.created}, {"model", meta.model},
               {"choices", cs},           {"usage", usage},
               {"timings", timings},      {"system_fingerprint", nullptr}};
  if (!choices.empty() && !choices[0].prompt_logprobs.is_null()) body["prompt_logprobs"] = choices[0].prompt_logprobs;
  return body;
}

namespace {

json chunk_base(const ResponseMeta& meta, const char* object, json choice, bool include_usage) {
  json j = {{"id", meta.id},
            {"object", object},
            {"created", meta.created},
            {"model", meta.model},
            {"system_fingerprint", nullptr},
            {"choices", json::array({std::move(choice)})}};
  if (include_usage) j["usage"] = nullptr;
  return j;
}

json reason_json(const std::optional<std::string>& r) { return r ? json(*r) : json(nullptr); }

}  // namespace

json completion_chunk(const ResponseMeta& meta, int index, const std::string& text, const json& logprobs,
                      const std::optional<std::string>& finish_reason, bool include_usage) {
  json choice = {
      {"index", index}, {"text", text}, {"logprobs", logprobs}, {"finish_reason", reason_json(finish_reason)}};
  return chunk_base(meta, "text_completion", std::move(choice), include_usage);
}

json chat_chunk(const ResponseMeta& meta, int index, const json& delta, const json& logprobs,
                const std::optional<std::string>& finish_reason, bool include_usage) {
  json choice = {
      {"index", index}, {"delta", delta}, {"logprobs", logprobs}, {"finish_reason", reason_json(finish_reason)}};
  return chunk_base(meta, "chat.completion.chunk", std::move(choice), include_usage);
}

json usage_chunk(const ResponseMeta& meta, const std::string& object, const json& usage, const json& timings) {
  return {{"id", meta.id},
          {"object", object},
          {"created", meta.created},
          {"model", meta.model},
          {"system_fingerprint", nullptr},
          {"choices", json::array()},
          {"usage", usage},
          {"timings", timings}};
}

}  // namespace tokenmill::server
