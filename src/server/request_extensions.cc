#include "server/request_extensions.h"

#include <array>
#include <limits>
#include <string_view>
#include <vector>

#include "server/api_error.h"
#include "server/json_fields.h"

namespace tokenmill::server {
namespace {

using Known = std::set<std::string, std::less<>>;

constexpr size_t kMaxBadWords = 256;  // each adds up to two banned sequences
constexpr int64_t kMaxInt32 = std::numeric_limits<int32_t>::max();

std::vector<int32_t> ext_token_ids(const JsonFields& f, std::string_view name, const ParseLimits& limits,
                                   size_t max_count) {
  const RequestJson* v = f.find(name);
  if (!v) return {};
  const std::string param = f.param(name);
  if (!v->is_array()) bad_request(param, "'{}' must be a list of token ids, got {}", param, describe_json(*v));
  if (v->size() > max_count)
    bad_request(param, "'{}' holds {} ids; at most {} are allowed", param, v->size(), max_count);
  std::vector<int32_t> ids;
  for (const RequestJson& x : *v) {
    const bool in_range = x.is_number_integer() && !(x.is_number_unsigned() && x.get<uint64_t>() > uint64_t{1} << 40) &&
                          x.get<int64_t>() >= 0 && x.get<int64_t>() < limits.n_vocab;
    if (!in_range)
      bad_request(param, "'{}' must hold token ids in [0, {}), got {}", param, limits.n_vocab, describe_json(x));
    ids.push_back(static_cast<int32_t>(x.get<int64_t>()));
  }
  return ids;
}

std::vector<std::string> ext_bad_words(const JsonFields& f) {
  const RequestJson* v = f.find("bad_words");
  if (!v) return {};
  if (!v->is_array()) bad_request("bad_words", "'bad_words' must be a list of strings, got {}", describe_json(*v));
  if (v->size() > kMaxBadWords)
    bad_request("bad_words", "'bad_words' holds {} words; at most {} are allowed", v->size(), kMaxBadWords);
  std::vector<std::string> out;
  for (const RequestJson& w : *v) {
    if (!w.is_string() || w.get_ref<const std::string&>().find_first_not_of(" \t\n\r") == std::string::npos)
      bad_request("bad_words", "'bad_words' must hold non-blank strings, got {}", describe_json(w));
    out.push_back(w.get<std::string>());
  }
  return out;
}

// A llama.cpp name for a number a standard field also sets: both given
// must agree, or the request is ambiguous.
std::optional<double> ext_alias_number(std::string_view alias, std::string_view standard,
                                       std::optional<double> alias_value, std::optional<double> standard_value) {
  if (alias_value && standard_value && *alias_value != *standard_value)
    bad_request(std::string(alias), "'{}' ({}) and '{}' ({}) differ; send one of them", alias, *alias_value, standard,
                *standard_value);
  return alias_value;
}

// Fields whose only honoured values are the default ones.
void ext_reject_unsupported(const JsonFields& f) {
  if (f.boolean("use_beam_search").value_or(false))
    bad_request("use_beam_search", "'use_beam_search' is not supported (send false or leave it out)");
  if (f.integer("mirostat", 0, 2).value_or(0) != 0)
    bad_request("mirostat", "'mirostat' is not supported (only 0, off)");
  f.number("mirostat_tau", 0.0, 1e6);  // only read by mirostat: checked, ignored
  f.number("mirostat_eta", 0.0, 1e6);
  if (const RequestJson* m = f.find("modalities")) {
    if (!m->is_array()) bad_request("modalities", "'modalities' must be a list of strings, got {}", describe_json(*m));
    for (const RequestJson& x : *m)
      if (!x.is_string() || x.get<std::string>() != "text")
        bad_request("modalities", "'modalities' {} is not supported (only \"text\")", describe_json(x));
  }
}

// Hints tokenmill has no use for: their types are checked, their values ignored.
void ext_check_hints(const JsonFields& f) {
  f.string("reasoning_effort");  // chat: passed to the template (parse_chat_extensions)
  if (const RequestJson* p = f.find("prediction"); p && !p->is_object())
    bad_request("prediction", "'prediction' must be an object, got {}", describe_json(*p));
  f.boolean("cache_prompt");  // the prefix cache always serves what it holds
  f.integer("id_slot", -1, kMaxInt32);
  f.boolean("timings_per_token");
}

// llama.cpp's sampler steps in the order tokenmill's Sampler applies them.
enum class Step { kPenalties, kTopK, kTypical, kTopP, kMinP, kTemperature, kInert, kUnsupported, kUnknown };

Step step_from_name(std::string_view n) {
  if (n == "penalties") return Step::kPenalties;
  if (n == "top_k" || n == "top-k") return Step::kTopK;
  if (n == "typ_p" || n == "typical_p" || n == "typical-p" || n == "typical" || n == "typ-p" || n == "typ")
    return Step::kTypical;
  if (n == "top_p" || n == "top-p" || n == "nucleus") return Step::kTopP;
  if (n == "min_p" || n == "min-p") return Step::kMinP;
  if (n == "temperature" || n == "temp") return Step::kTemperature;
  // Steps that act only with parameters tokenmill does not accept (dry_*,
  // xtc_*, top_n_sigma): off, wherever they stand.
  if (n == "dry" || n == "xtc" || n == "top_n_sigma") return Step::kInert;
  if (n == "infill") return Step::kUnsupported;
  return Step::kUnknown;
}

// llama.cpp's one-letter spelling ("edkypmxt").
std::string_view step_name_from_char(char c) {
  switch (c) {
    case 'e': return "penalties";
    case 'd': return "dry";
    case 'k': return "top_k";
    case 'y': return "typ_p";
    case 'p': return "top_p";
    case 'm': return "min_p";
    case 'x': return "xtc";
    case 't': return "temperature";
    case 's': return "top_n_sigma";
    case 'i': return "infill";
    default: return "";
  }
}

std::vector<std::string> sampler_names(const RequestJson& v) {
  std::vector<std::string> names;
  if (v.is_string()) {
    for (char c : v.get<std::string>()) {
      const std::string_view n = step_name_from_char(c);
      if (n.empty()) bad_request("samplers", "'samplers' holds the unknown sampler letter '{}'", std::string(1, c));
      names.emplace_back(n);
    }
  } else if (v.is_array()) {
    for (const RequestJson& x : v) {
      if (!x.is_string())
        bad_request("samplers", "'samplers' must be a list of sampler names, got {}", describe_json(x));
      names.push_back(x.get<std::string>());
    }
  } else {
    bad_request("samplers", "'samplers' must be a list of sampler names or a string of their letters, got {}",
                describe_json(v));
  }
  return names;
}

// llama.cpp's sampler order. tokenmill's order is fixed (sampler.h), so a
// list is honoured when its steps come in that order; a step left out is
// off, as llama.cpp builds its chain only from the list.
void apply_samplers(const JsonFields& f, sample::SamplingParams& s) {
  const RequestJson* v = f.find("samplers");
  if (!v) return;
  std::array<bool, 6> listed{};
  int last = -1;
  for (const std::string& name : sampler_names(*v)) {
    const Step step = step_from_name(name);
    if (step == Step::kUnknown) bad_request("samplers", "'samplers' names an unknown sampler '{}'", name);
    if (step == Step::kUnsupported) bad_request("samplers", "'samplers': '{}' is not supported", name);
    if (step == Step::kInert) continue;
    const int index = static_cast<int>(step);
    if (index <= last)
      bad_request("samplers",
                  "'samplers' order is not supported: '{}' comes too late; tokenmill applies penalties, top_k, "
                  "typ_p, top_p, min_p, temperature in this order (any of them may be left out)",
                  name);
    last = index;
    listed[static_cast<size_t>(index)] = true;
  }
  if (!listed[static_cast<size_t>(Step::kPenalties)]) {
    s.repetition_penalty = 1.0f;
    s.frequency_penalty = 0.0f;
    s.presence_penalty = 0.0f;
  }
  if (!listed[static_cast<size_t>(Step::kTopK)]) s.top_k = 0;
  if (!listed[static_cast<size_t>(Step::kTypical)]) s.typical_p = 1.0f;
  if (!listed[static_cast<size_t>(Step::kTopP)]) s.top_p = 1.0f;
  if (!listed[static_cast<size_t>(Step::kMinP)]) s.min_p = 0.0f;
  if (!listed[static_cast<size_t>(Step::kTemperature)] && s.temperature != 1.0f)
    bad_request("samplers", "'samplers' without 'temperature' is not supported with a temperature other than 1");
}

void parse_llama_names(const JsonFields& f, SamplingRequest& r) {
  sample::SamplingParams& s = r.sampling;
  const std::optional<double> rp = ext_alias_number(
      "repeat_penalty", "repetition_penalty", f.number_above("repeat_penalty", 0.0, sample::kMaxRepetitionPenalty),
      f.number_above("repetition_penalty", 0.0, sample::kMaxRepetitionPenalty));
  if (rp) s.repetition_penalty = static_cast<float>(*rp);
  if (std::optional<int64_t> n = f.integer("repeat_last_n", -1, kMaxInt32)) s.penalty_last_n = static_cast<int>(*n);
  s.typical_p = static_cast<float>(f.number_above("typical_p", 0.0, 1.0).value_or(1.0));
  r.n_keep = f.integer("n_keep", -1, kMaxInt32);
  ext_check_hints(f);
  apply_samplers(f, s);
}

void parse_vllm_names(const JsonFields& f, const ParseLimits& limits, SamplingRequest& r) {
  sample::SamplingParams& s = r.sampling;
  s.min_tokens = static_cast<int>(f.integer("min_tokens", 0, kMaxInt32).value_or(0));
  s.stop_token_ids = ext_token_ids(f, "stop_token_ids", limits, sample::kMaxStopTokenIds);
  s.include_stop_str_in_output = f.boolean("include_stop_str_in_output").value_or(false);
  s.skip_special_tokens = f.boolean("skip_special_tokens").value_or(true);
  s.spaces_between_special_tokens = f.boolean("spaces_between_special_tokens").value_or(true);
  if (f.has("allowed_token_ids")) {
    s.allowed_token_ids = ext_token_ids(f, "allowed_token_ids", limits, static_cast<size_t>(limits.n_vocab));
    if (s.allowed_token_ids.empty()) bad_request("allowed_token_ids", "'allowed_token_ids' must not be empty");
  }
  r.bad_words = ext_bad_words(f);
  r.add_special_tokens = f.boolean("add_special_tokens");
  if (std::optional<int64_t> k = f.integer("prompt_logprobs", 0, engine::kMaxTopLogprobs)) {
    if (r.stream) bad_request("prompt_logprobs", "'prompt_logprobs' is not supported with 'stream'");
    r.prompt_logprobs = static_cast<int>(*k);
  }
  r.truncate_prompt_tokens = f.integer("truncate_prompt_tokens", -1, kMaxInt32);
  if (r.truncate_prompt_tokens == 0)
    bad_request("truncate_prompt_tokens", "'truncate_prompt_tokens' must be -1 (the context length) or at least 1");
}

}  // namespace

const Known& extension_fields() {
  static const Known k = {// vLLM
                          "min_tokens", "stop_token_ids", "include_stop_str_in_output", "skip_special_tokens",
                          "spaces_between_special_tokens", "prompt_logprobs", "add_special_tokens", "bad_words",
                          "allowed_token_ids", "truncate_prompt_tokens", "use_beam_search",
                          // OpenAI
                          "reasoning_effort", "modalities", "prediction",
                          // llama.cpp
                          "n_predict", "n_probs", "repeat_penalty", "repeat_last_n", "typical_p", "n_keep",
                          "cache_prompt", "id_slot", "timings_per_token", "samplers", "mirostat", "mirostat_tau",
                          "mirostat_eta"};
  return k;
}

const Known& chat_extension_fields() {
  static const Known k = {"chat_template_kwargs", "continue_final_message"};
  return k;
}

void parse_extensions(const JsonFields& f, const ParseLimits& limits, SamplingRequest& r) {
  ext_reject_unsupported(f);
  parse_vllm_names(f, limits, r);
  parse_llama_names(f, r);
}

void parse_n_predict(const JsonFields& f, int64_t lo, SamplingRequest& r) {
  const std::optional<int64_t> n = f.integer("n_predict", -1, kMaxInt32);
  if (!n) return;
  if (*n != -1 && *n < lo)
    bad_request("n_predict", "'n_predict' must be -1 (until the context is full) or an integer in [{}, {}], got {}", lo,
                kMaxInt32, *n);
  if (r.max_tokens && *r.max_tokens != *n)
    bad_request("n_predict", "'n_predict' ({}) and 'max_tokens' ({}) differ; send one of them", *n, *r.max_tokens);
  if (*n == -1) {
    r.max_tokens_to_context = true;
  } else {
    r.max_tokens = *n;
  }
}

void parse_n_probs(const JsonFields& f, const char* top_param, SamplingRequest& r) {
  const std::optional<int64_t> n = f.integer("n_probs", 0, engine::kMaxTopLogprobs);
  if (!n || *n == 0) return;
  if (f.has(top_param) && (!r.logprobs || r.top_logprobs != *n))
    bad_request("n_probs", "'n_probs' ({}) and '{}' ask for different logprobs; send one of them", *n, top_param);
  r.logprobs = true;
  r.top_logprobs = static_cast<int>(*n);
}

void check_min_tokens(const SamplingRequest& r, int64_t max_tokens) {
  if (r.sampling.min_tokens > max_tokens)
    bad_request("min_tokens", "'min_tokens' ({}) must not exceed max_tokens ({})", r.sampling.min_tokens, max_tokens);
}

void parse_chat_extensions(const JsonFields& f, ChatRequest& r) {
  bool explicit_generation_prompt = f.boolean("add_generation_prompt").value_or(false);
  if (const RequestJson* kw = f.find("chat_template_kwargs")) {
    if (!kw->is_object())
      bad_request("chat_template_kwargs", "'chat_template_kwargs' must be an object, got {}", describe_json(*kw));
    JsonFields kf(*kw, "chat_template_kwargs.");
    // Every other key becomes a template variable (enable_thinking, ...).
    for (auto it = kw->begin(); it != kw->end(); ++it)
      if (it.key() != "add_generation_prompt") r.conversation.template_kwargs[it.key()] = it.value();
    if (std::optional<bool> agp = kf.boolean("add_generation_prompt")) {
      if (f.has("add_generation_prompt") && *agp != r.add_generation_prompt)
        bad_request(
            "chat_template_kwargs.add_generation_prompt",
            "'chat_template_kwargs.add_generation_prompt' and 'add_generation_prompt' differ; send one of them");
      r.add_generation_prompt = *agp;
      explicit_generation_prompt = *agp;
    }
  }
  r.conversation.reasoning_effort = f.string("reasoning_effort");
  r.continue_final_message = f.boolean("continue_final_message").value_or(false);
  if (!r.continue_final_message) return;
  // As vLLM: only an explicit add_generation_prompt true conflicts; the
  // continued message is never followed by a generation prompt.
  if (explicit_generation_prompt)
    bad_request("continue_final_message", "'continue_final_message' and 'add_generation_prompt' cannot both be true");
  if (r.conversation.messages.empty() || r.conversation.messages.back().role != "assistant")
    bad_request("continue_final_message", "'continue_final_message' needs the last message to be the assistant's");
  r.add_generation_prompt = false;
}

}  // namespace tokenmill::server
