#include "server/llamacpp/llamacpp_request.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "server/api_error.h"

namespace tokenmill::server {
namespace {

using nlohmann::json;

// Fields of llama.cpp samplers tokenmill does not implement, with the value
// that turns each off. A client that sends the off value (llama.cpp's web
// UI sends every field) is served; any other value is refused.
struct OffValue {
  const char* name;
  double off;
  bool at_most;  // any value <= off is off too (top_n_sigma: -1)
};
constexpr OffValue kOffSamplers[] = {
    {"dynatemp_range", 0.0, false}, {"xtc_probability", 0.0, false}, {"dry_multiplier", 0.0, false},
    {"top_n_sigma", 0.0, true},     {"tfs_z", 1.0, false},
};

// Fields with no effect on what is generated here: the parameters of the
// samplers above (meaningless while they are off), and llama.cpp's timing,
// scheduling and reporting knobs. Accepted and dropped.
const std::set<std::string, std::less<>>& ignored_fields() {
  static const std::set<std::string, std::less<>> k = {
      "dynatemp_exponent",  "xtc_threshold",         "dry_base",    "dry_allowed_length",
      "dry_penalty_last_n", "dry_sequence_breakers", "min_keep",    "n_cache_reuse",
      "t_max_prompt_ms",    "t_max_predict_ms",      "n_indent",    "timings_per_token",
      "return_progress",    "sse_ping_interval",     "penalize_nl", "n_discard"};
  return k;
}

bool is_llama_random_seed(const RequestJson& v) {
  if (v.is_number_unsigned()) return v.get<uint64_t>() == 0xFFFFFFFFu;
  return v.is_number_integer() && (v.get<int64_t>() == -1 || v.get<int64_t>() == 0xFFFFFFFF);
}

void drop_off_samplers(RequestJson& j) {
  for (const OffValue& o : kOffSamplers) {
    auto it = j.find(o.name);
    if (it == j.end()) continue;
    if (!it->is_null()) {
      if (!it->is_number()) bad_request(o.name, "'{}' must be a number, got {}", o.name, describe_json(*it));
      const double v = it->get<double>();
      if (o.at_most ? v > o.off : v != o.off)
        bad_request(o.name, "'{}' is not supported (this sampler does not exist here); send {} or leave it out", o.name,
                    o.off);
    }
    j.erase(it);
  }
  for (const std::string& name : ignored_fields()) j.erase(name);
  if (auto it = j.find("post_sampling_probs"); it != j.end()) {
    if (!it->is_null() && !it->is_boolean())
      bad_request("post_sampling_probs", "'post_sampling_probs' must be a boolean, got {}", describe_json(*it));
    if (it->is_boolean() && it->get<bool>())
      bad_request("post_sampling_probs",
                  "'post_sampling_probs' is not supported: n_probs reports the model's "
                  "log-probabilities before sampling");
    j.erase(it);
  }
}

// llama.cpp's per-request adapter list [{"id": i, "scale": s}] -> the one
// adapter it selects (an index into GET /lora-adapters). An entry with
// scale 0 is off, as llama.cpp reads it; adapters run at the scale they
// were loaded with, so any other scale but 1 is refused, as is more than
// one adapter (a request runs on one adapter here).
std::optional<int64_t> take_lora_field(RequestJson& j) {
  auto it = j.find("lora");
  if (it == j.end()) return std::nullopt;
  std::optional<int64_t> selected;
  if (!it->is_null() && !it->is_array())
    bad_request("lora", "'lora' must be a list of {{\"id\": N, \"scale\": X}}, got {}", describe_json(*it));
  for (size_t i = 0; it->is_array() && i < it->size(); ++i) {
    const RequestJson& e = (*it)[i];
    const std::string param = fmt::format("lora[{}]", i);
    if (!e.is_object() || !e.contains("id") || !e["id"].is_number_integer() || e["id"].get<int64_t>() < 0)
      bad_request(param, "'{}' must be an object with a non-negative integer 'id' (see GET /lora-adapters), got {}",
                  param, describe_json(e));
    for (const auto& [key, value] : e.items())
      if (key != "id" && key != "scale") bad_request(param, "'{}' has an unknown field '{}'", param, key);
    const double scale = e.contains("scale") && e["scale"].is_number() ? e["scale"].get<double>() : 1.0;
    if (e.contains("scale") && !e["scale"].is_number())
      bad_request(param, "'{}.scale' must be a number, got {}", param, describe_json(e["scale"]));
    if (scale == 0.0) continue;
    if (scale != 1.0)
      bad_request(param,
                  "'{}.scale' is {}: adapters run at the scale they were loaded with; send 1 to use one, 0 to leave "
                  "it off",
                  param, scale);
    if (selected) bad_request("lora", "'lora' selects more than one adapter; a request runs on one adapter at most");
    selected = e["id"].get<int64_t>();
  }
  j.erase(it);
  return selected;
}

// llama.cpp's [[token, bias], ...] (bias false: never) -> OpenAI's
// {"token": bias}; a string in place of the id stands for each of its
// tokens. The object form passes as it is.
void translate_logit_bias(RequestJson& j, const tokenizer::Tokenizer* tok) {
  auto it = j.find("logit_bias");
  if (it == j.end() || !it->is_array()) return;
  RequestJson out = RequestJson::object();
  for (const RequestJson& pair : *it) {
    if (!pair.is_array() || pair.size() != 2 || !(pair[0].is_number_integer() || pair[0].is_string()) ||
        !(pair[1].is_number() || pair[1].is_boolean()))
      bad_request("logit_bias", "'logit_bias' as a list holds [token id or text, bias or false] pairs, got {}",
                  describe_json(pair));
    if (pair[1].is_boolean() && pair[1].get<bool>())
      bad_request("logit_bias", "'logit_bias' bias must be a number or false, got true");
    // -100 is the strongest bias the OpenAI field takes: after softmax it
    // leaves the token no chance, which is what false means.
    const double bias = pair[1].is_boolean() ? -100.0 : pair[1].get<double>();
    std::vector<int32_t> ids;
    if (pair[0].is_string()) {
      if (!tok) bad_request("logit_bias", "'logit_bias' text keys need a tokenizer; this model has none");
      ids = tok->encode(pair[0].get<std::string>(), /*add_special=*/false, /*parse_special=*/false);
    } else {
      const int64_t id = pair[0].get<int64_t>();
      if (id < 0 || id > std::numeric_limits<int32_t>::max())
        bad_request("logit_bias", "'logit_bias' token id {} is out of range", id);
      ids.push_back(static_cast<int32_t>(id));
    }
    for (int32_t id : ids) out[std::to_string(id)] = bias;
  }
  *it = std::move(out);
}

void translate_sampling(RequestJson& j, const tokenizer::Tokenizer* tok, int32_t n_vocab) {
  if (auto it = j.find("seed"); it != j.end() && is_llama_random_seed(*it)) j.erase(it);
  // llama.cpp samples greedily below zero; the OpenAI field says so with 0.
  if (auto it = j.find("temperature"); it != j.end() && it->is_number() && it->get<double>() < 0) *it = 0.0;
  if (auto it = j.find("stop"); it != j.end() && it->is_array()) {
    RequestJson kept = RequestJson::array();
    for (const RequestJson& s : *it)
      if (!(s.is_string() && s.get_ref<const std::string&>().empty())) kept.push_back(s);  // llama.cpp skips ""
    *it = std::move(kept);
  }
  if (auto it = j.find("n_cmpl"); it != j.end()) {
    if (!j.contains("n")) j["n"] = *it;
    j.erase("n_cmpl");
  }
  translate_logit_bias(j, tok);
  const std::pair<const char*, double> defaults[] = {
      {"temperature", kLlamaDefaultTemperature}, {"top_p", kLlamaDefaultTopP}, {"min_p", kLlamaDefaultMinP}};
  for (const auto& [name, value] : defaults)
    if (!j.contains(name) || j[name].is_null()) j[name] = value;
  if (!j.contains("top_k") || j["top_k"].is_null()) j["top_k"] = std::min(kLlamaDefaultTopK, std::max(n_vocab, 0));
}

std::vector<std::string> parse_response_fields(const RequestJson& v) {
  if (!v.is_array()) bad_request("response_fields", "'response_fields' must be a list of strings");
  std::vector<std::string> out;
  for (const RequestJson& f : v) {
    if (!f.is_string()) bad_request("response_fields", "'response_fields' must be a list of strings");
    out.push_back(f.get<std::string>());
  }
  return out;
}

// A prompt list: several prompts when it holds no bare id (["a", [1, 2]]);
// one prompt of ids and text otherwise ([1, "a", 2]).
std::vector<RequestJson> split_prompts(const RequestJson& v) {
  if (v.is_string()) return {v};
  if (!v.is_array() || v.empty())
    bad_request("prompt",
                "'prompt' must be a string, a list of token ids (mixed with strings), or a list of "
                "those; got {}",
                describe_json(v));
  bool has_id = false, has_list = false;
  for (const RequestJson& e : v) {
    has_id = has_id || e.is_number();
    has_list = has_list || e.is_array();
  }
  if (has_id && has_list)
    bad_request("prompt", "'prompt' mixes token ids with lists: send one prompt or a list of prompts");
  if (has_id) return {v};
  if (v.size() > static_cast<size_t>(kMaxPromptsPerRequest))
    bad_request("prompt", "'prompt' holds {} prompts; at most {} are allowed", v.size(), kMaxPromptsPerRequest);
  return std::vector<RequestJson>(v.begin(), v.end());
}

}  // namespace

LlamaBody translate_llama_body(std::string_view body, bool infill, const tokenizer::Tokenizer* tok,
                               const ParseLimits& limits) {
  LlamaBody out;
  out.sampling = parse_json_object(body, limits.json);
  RequestJson& j = out.sampling;
  if (j.contains("echo")) bad_request("echo", "'echo' is not part of this endpoint; use /v1/completions");
  if (!infill) {
    const auto it = j.find("prompt");
    if (it == j.end() || it->is_null()) bad_request("prompt", "'prompt' is required");
    out.prompts = split_prompts(*it);
    j.erase(it);
  }
  if (auto it = j.find("return_tokens"); it != j.end()) {
    if (!it->is_null() && !it->is_boolean()) bad_request("return_tokens", "'return_tokens' must be a boolean");
    out.return_tokens = it->is_boolean() && it->get<bool>();
    j.erase(it);
  }
  if (auto it = j.find("response_fields"); it != j.end()) {
    if (!it->is_null()) out.response_fields = parse_response_fields(*it);
    j.erase(it);
  }
  // Read, not taken: the sampling parser owns these fields.
  if (auto it = j.find("id_slot"); it != j.end() && it->is_number_integer() && it->get<int64_t>() >= 0 &&
                                   it->get<int64_t>() <= std::numeric_limits<int32_t>::max())
    out.id_slot = static_cast<int>(it->get<int64_t>());
  if (auto it = j.find("stream"); it != j.end() && it->is_boolean()) out.stream = it->get<bool>();
  drop_off_samplers(j);
  out.lora_id = take_lora_field(j);
  translate_sampling(j, tok, limits.n_vocab);
  return out;
}

std::vector<int32_t> tokenize_llama_prompt(const RequestJson& prompt, const tokenizer::Tokenizer* tok,
                                           const ParseLimits& limits, bool add_special, const std::string& param) {
  auto encode = [&](const RequestJson& text, bool first) {
    if (!tok) bad_request(param, "the model has no tokenizer; send '{}' as token ids", param);
    return tok->encode(text.get_ref<const std::string&>(), add_special && first, /*parse_special=*/true);
  };
  if (prompt.is_string()) return encode(prompt, true);
  if (!prompt.is_array())
    bad_request(param, "'{}' must be a string or a list of token ids and strings, got {}", param,
                describe_json(prompt));
  std::vector<int32_t> ids;
  for (size_t i = 0; i < prompt.size(); ++i) {
    const RequestJson& e = prompt[i];
    if (e.is_string()) {
      const std::vector<int32_t> part = encode(e, i == 0);
      ids.insert(ids.end(), part.begin(), part.end());
      continue;
    }
    const bool in_range = e.is_number_integer() && !(e.is_number_unsigned() && e.get<uint64_t>() > (1u << 31)) &&
                          e.get<int64_t>() >= 0 && e.get<int64_t>() < limits.n_vocab;
    if (!in_range)
      bad_request(param, "'{}' holds {}, which is neither text nor a token id in [0, {})", param, describe_json(e),
                  limits.n_vocab);
    ids.push_back(static_cast<int32_t>(e.get<int64_t>()));
  }
  return ids;
}

nlohmann::json select_response_fields(const nlohmann::json& response, const std::vector<std::string>& fields) {
  if (fields.empty()) return response;
  json out = json::object();
  for (const std::string& path : fields) {
    const json* at = &response;
    size_t start = 0;
    bool found = true;
    while (found) {
      const size_t slash = path.find('/', start);
      const std::string key = path.substr(start, slash == std::string::npos ? std::string::npos : slash - start);
      found = at->is_object() && at->contains(key);
      if (found) at = &(*at)[key];
      if (slash == std::string::npos) break;
      start = slash + 1;
    }
    if (found) out[path] = *at;
  }
  return out;
}

}  // namespace tokenmill::server
