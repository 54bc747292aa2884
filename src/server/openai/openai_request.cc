#include "server/openai/openai_request.h"

#include <cmath>
#include <limits>
#include <set>

#include "server/api_error.h"
#include "server/constraint_request.h"
#include "server/json_fields.h"
#include "server/openai/chat_messages.h"
#include "server/request_extensions.h"
#include "server/tools/tool_prompt.h"
#include "server/tools/tool_request.h"
#include "spec/ngram_proposer.h"

namespace tokenmill::server {
namespace {

using Known = std::set<std::string, std::less<>>;

constexpr double kMaxTimeoutS = 24 * 3600;  // a day: anything longer is a mistake

// Fields both generation endpoints accept. Harmless OpenAI fields we do not
// act on (user, metadata, store, service_tier) are accepted and ignored.
const Known& common_fields() {
  static const Known k = {"model",
                          "max_tokens",
                          "temperature",
                          "top_p",
                          "top_k",
                          "min_p",
                          "seed",
                          "stop",
                          "n",
                          "presence_penalty",
                          "frequency_penalty",
                          "repetition_penalty",
                          "logit_bias",
                          "logprobs",
                          "stream",
                          "stream_options",
                          "user",
                          "metadata",
                          "store",
                          "service_tier",
                          "priority",
                          "speculative.n_max",
                          "kv_policy",
                          "ignore_eos",
                          "best_of",
                          "timeout"};
  return k;
}

int32_t token_id(const RequestJson& v, const std::string& param, const ParseLimits& limits) {
  if (!v.is_number_integer())
    bad_request(param, "'{}' must hold token ids (integers), got {}", param, describe_json(v));
  const int64_t id = v.is_number_unsigned() && v.get<uint64_t>() > uint64_t{1} << 40 ? -1 : v.get<int64_t>();
  if (id < 0 || id >= limits.n_vocab)
    bad_request(param, "'{}' holds token id {} outside the vocabulary [0, {})", param, describe_json(v),
                limits.n_vocab);
  return static_cast<int32_t>(id);
}

std::vector<int32_t> token_list(const RequestJson& arr, const std::string& param, const ParseLimits& limits) {
  std::vector<int32_t> ids;
  ids.reserve(arr.size());
  for (const RequestJson& v : arr) ids.push_back(token_id(v, param, limits));
  return ids;
}

std::vector<std::string> parse_stop(const JsonFields& f) {
  const RequestJson* v = f.find("stop");
  if (!v) return {};
  std::vector<std::string> out;
  if (v->is_string()) {
    out.push_back(v->get<std::string>());
  } else if (v->is_array()) {
    for (const RequestJson& s : *v) {
      if (!s.is_string()) bad_request("stop", "'stop' must be a string or a list of strings, got {}", describe_json(s));
      out.push_back(s.get<std::string>());
    }
  } else {
    bad_request("stop", "'stop' must be a string or a list of strings, got {}", describe_json(*v));
  }
  if (out.size() > sample::kMaxStopStrings)
    bad_request("stop", "'stop' holds {} strings; at most {} are allowed", out.size(), sample::kMaxStopStrings);
  for (const std::string& s : out)
    if (s.empty()) bad_request("stop", "'stop' strings must not be empty");
  return out;
}

std::vector<std::pair<int32_t, float>> parse_logit_bias(const JsonFields& f, const ParseLimits& limits) {
  const RequestJson* v = f.find("logit_bias");
  if (!v) return {};
  if (!v->is_object())
    bad_request("logit_bias", "'logit_bias' must be an object mapping token ids to numbers, got {}", describe_json(*v));
  if (v->size() > kMaxLogitBias)
    bad_request("logit_bias", "'logit_bias' has {} entries; at most {} are allowed", v->size(), kMaxLogitBias);
  std::vector<std::pair<int32_t, float>> out;
  for (auto it = v->begin(); it != v->end(); ++it) {
    const std::string& key = it.key();
    int64_t id = -1;
    if (!key.empty() && key.size() <= 10 && key.find_first_not_of("0123456789") == std::string::npos)
      id = std::stoll(key);
    if (id < 0 || id >= limits.n_vocab)
      bad_request("logit_bias", "'logit_bias' key '{}' is not a token id in [0, {})", key, limits.n_vocab);
    if (!it->is_number() || std::fabs(it->get<double>()) > kMaxAbsLogitBias)
      bad_request("logit_bias", "'logit_bias' value for token {} must be a number in [-100, 100], got {}", key,
                  describe_json(*it));
    out.emplace_back(static_cast<int32_t>(id), static_cast<float>(it->get<double>()));
  }
  return out;
}

engine::Priority parse_priority(const JsonFields& f) {
  const RequestJson* v = f.find("priority");
  if (!v) return engine::Priority::kNormal;
  std::optional<engine::Priority> p;
  if (v->is_string()) p = parse_priority_name(v->get<std::string>());
  if (v->is_number_integer()) {
    const int64_t x = v->get<int64_t>();
    if (x >= 0 && x <= 2) p = static_cast<engine::Priority>(x);
  }
  if (!p)
    bad_request("priority", "'priority' must be \"high\", \"normal\", \"low\" or 0, 1, 2, got {}", describe_json(*v));
  return *p;
}

void parse_stream(const JsonFields& f, SamplingRequest& r) {
  r.stream = f.boolean("stream").value_or(false);
  const RequestJson* so = f.find("stream_options");
  if (!so) return;
  if (!r.stream) bad_request("stream_options", "'stream_options' is only allowed when 'stream' is true");
  if (!so->is_object()) bad_request("stream_options", "'stream_options' must be an object, got {}", describe_json(*so));
  JsonFields sf(*so, "stream_options.");
  sf.reject_unknown({"include_usage", "continuous_usage_stats"});
  r.include_usage = sf.boolean("include_usage").value_or(false);
}

// "kv_policy": a policy's name (its defaults), or an object naming its
// type and any of its fields.
std::optional<kv::KvPolicy> parse_kv_policy_field(const JsonFields& f) {
  const RequestJson* v = f.find("kv_policy");
  if (v == nullptr) return std::nullopt;
  const kv::KvPolicy defaults;
  std::string type;
  int64_t sinks = defaults.sinks, window = defaults.window, budget = defaults.budget;
  std::string positions(kv::kv_positions_name(defaults.positions));
  if (v->is_string()) {
    type = v->get<std::string>();
  } else if (v->is_object()) {
    JsonFields pf(*v, "kv_policy.");
    pf.reject_unknown({"type", "sinks", "window", "budget", "positions"});
    const std::optional<std::string> t = pf.string("type");
    if (!t) bad_request("kv_policy.type", "'kv_policy.type' is required (\"full\", \"streaming\" or \"h2o\")");
    type = *t;
    constexpr int64_t kMaxPositions = int64_t{1} << 40;
    sinks = pf.integer("sinks", 0, kMaxPositions).value_or(sinks);
    window = pf.integer("window", 1, kMaxPositions).value_or(window);
    budget = pf.integer("budget", 1, kMaxPositions).value_or(budget);
    positions = pf.string("positions").value_or(positions);
  } else {
    bad_request("kv_policy", "'kv_policy' must be a policy name or an object, got {}", describe_json(*v));
  }
  try {
    return kv::make_kv_policy(type, sinks, window, positions, budget);
  } catch (const Error& e) {
    bad_request("kv_policy", "'kv_policy': {}", e.what());
  }
}

// Fields whose only supported value is the default: refuse anything else
// rather than silently ignore what the client asked for.
void reject_unsupported(const JsonFields& f, int n) {
  if (auto best_of = f.integer("best_of", 1, kMaxChoices); best_of && *best_of != n)
    bad_request("best_of", "'best_of' other than n is not supported");
}

SamplingRequest parse_common(const JsonFields& f, const ParseLimits& limits) {
  SamplingRequest r;
  r.model = f.string("model").value_or("");
  r.n = static_cast<int>(f.integer("n", 1, kMaxChoices).value_or(1));
  sample::SamplingParams& s = r.sampling;
  s.temperature = static_cast<float>(f.number("temperature", 0.0, kMaxTemperature).value_or(1.0));
  s.top_p = static_cast<float>(f.number_above("top_p", 0.0, 1.0).value_or(1.0));
  s.top_k = static_cast<int>(std::max<int64_t>(0, f.integer("top_k", -1, limits.n_vocab).value_or(0)));
  s.min_p = static_cast<float>(f.number("min_p", 0.0, 1.0).value_or(0.0));
  s.presence_penalty = static_cast<float>(
      f.number("presence_penalty", -sample::kMaxAbsPresencePenalty, sample::kMaxAbsPresencePenalty).value_or(0.0));
  s.frequency_penalty = static_cast<float>(
      f.number("frequency_penalty", -sample::kMaxAbsFrequencyPenalty, sample::kMaxAbsFrequencyPenalty).value_or(0.0));
  s.repetition_penalty =
      static_cast<float>(f.number_above("repetition_penalty", 0.0, sample::kMaxRepetitionPenalty).value_or(1.0));
  if (std::optional<uint64_t> seed = f.bits64("seed")) {
    s.seed = *seed;
    r.seed_given = true;
  }
  s.stop = parse_stop(f);
  s.logit_bias = parse_logit_bias(f, limits);
  s.ignore_eos = f.boolean("ignore_eos").value_or(false);
  r.priority = parse_priority(f);
  r.spec_max_draft = static_cast<int>(f.integer("speculative.n_max", 0, spec::kMaxDraft).value_or(-1));
  r.kv_policy = parse_kv_policy_field(f);
  parse_stream(f, r);
  r.timeout_s = f.number_above("timeout", 0.0, kMaxTimeoutS);
  reject_unsupported(f, r.n);
  parse_extensions(f, limits, r);
  r.constraint = parse_output_constraint(f);
  return r;
}

std::vector<PromptInput> parse_prompts(const JsonFields& f, const ParseLimits& limits) {
  const RequestJson* v = f.find("prompt");
  if (!v) bad_request("prompt", "'prompt' is required");
  auto text_prompt = [](const RequestJson& s) {
    if (s.get_ref<const std::string&>().empty()) bad_request("prompt", "'prompt' must not be empty");
    return PromptInput{true, s.get<std::string>(), {}};
  };
  if (v->is_string()) return {text_prompt(*v)};
  if (!v->is_array())
    bad_request("prompt", "'prompt' must be a string, a list of token ids, or a list of either; got {}",
                describe_json(*v));
  if (v->empty()) bad_request("prompt", "'prompt' must not be empty");
  if (v->front().is_number()) return {PromptInput{false, "", token_list(*v, "prompt", limits)}};
  if (v->size() > kMaxPromptsPerRequest)
    bad_request("prompt", "'prompt' holds {} prompts; at most {} are allowed", v->size(), kMaxPromptsPerRequest);
  std::vector<PromptInput> out;
  for (const RequestJson& p : *v) {
    if (p.is_string()) {
      out.push_back(text_prompt(p));
    } else if (p.is_array()) {
      if (p.empty()) bad_request("prompt", "'prompt' must not hold an empty list of token ids");
      out.push_back(PromptInput{false, "", token_list(p, "prompt", limits)});
    } else {
      bad_request("prompt", "'prompt' list items must be strings or lists of token ids, got {}", describe_json(p));
    }
  }
  return out;
}

Known with_constraint_fields(Known known) {
  known.insert(constraint_fields().begin(), constraint_fields().end());
  known.insert(extension_fields().begin(), extension_fields().end());
  return known;
}

}  // namespace

std::optional<engine::Priority> parse_priority_name(std::string_view name) {
  if (name == "high" || name == "0") return engine::Priority::kHigh;
  if (name == "normal" || name == "1") return engine::Priority::kNormal;
  if (name == "low" || name == "2") return engine::Priority::kLow;
  return std::nullopt;
}

CompletionRequest parse_completion_request(std::string_view body, const ParseLimits& limits) {
  const RequestJson j = parse_json_object(body, limits.json);
  JsonFields f(j);
  Known known = with_constraint_fields(common_fields());
  known.insert({"prompt", "echo", "suffix"});
  f.reject_unknown(known);
  CompletionRequest r;
  r.common = parse_common(f, limits);
  r.prompts = parse_prompts(f, limits);
  r.echo = f.boolean("echo").value_or(false);
  // max_tokens 0 only scores the prompt: for echo, or prompt_logprobs.
  const int64_t least_tokens = r.echo || r.common.prompt_logprobs >= 0 ? 0 : 1;
  r.common.max_tokens = f.integer("max_tokens", least_tokens, std::numeric_limits<int32_t>::max());
  parse_n_predict(f, least_tokens, r.common);
  if (r.common.max_tokens) check_min_tokens(r.common, *r.common.max_tokens);
  if (std::optional<int64_t> lp = f.integer("logprobs", 0, engine::kMaxTopLogprobs)) {
    r.common.logprobs = true;
    r.common.top_logprobs = static_cast<int>(*lp);
  }
  parse_n_probs(f, "logprobs", r.common);
  if (f.string("suffix").value_or("") != "") bad_request("suffix", "'suffix' (insertion) is not supported");
  if (r.prompts.size() * static_cast<size_t>(r.common.n) > kMaxPromptsPerRequest)
    bad_request("n", "{} prompts x n = {} choices; at most {} are allowed", r.prompts.size(), r.common.n,
                kMaxPromptsPerRequest);
  return r;
}

ChatRequest parse_chat_request(std::string_view body, const ParseLimits& limits) {
  const RequestJson j = parse_json_object(body, limits.json);
  JsonFields f(j);
  Known known = with_constraint_fields(common_fields());
  known.insert({"messages", "max_completion_tokens", "top_logprobs", "add_generation_prompt", "tools", "tool_choice",
                "functions", "function_call", "parallel_tool_calls"});
  known.insert(chat_extension_fields().begin(), chat_extension_fields().end());
  f.reject_unknown(known);
  ChatRequest r;
  r.common = parse_common(f, limits);
  ToolsRequest& tools = r.conversation.tool_request;
  tools = parse_tools_request(f);
  if (tools.active() && r.common.constraint)
    bad_request(r.common.constraint->param,
                "'{}' cannot be combined with 'tools' (the tool calls already fix the output's format); "
                "send one of them, or tool_choice \"none\"",
                r.common.constraint->param);
  r.conversation.messages = parse_api_messages(f);
  if (tools.active()) r.conversation.tools = *f.find("tools");
  r.common.max_tokens = f.integer("max_completion_tokens", 1, std::numeric_limits<int32_t>::max());
  if (!r.common.max_tokens) r.common.max_tokens = f.integer("max_tokens", 1, std::numeric_limits<int32_t>::max());
  parse_n_predict(f, 1, r.common);
  if (r.common.max_tokens) check_min_tokens(r.common, *r.common.max_tokens);
  r.common.logprobs = f.boolean("logprobs").value_or(false);
  if (std::optional<int64_t> top = f.integer("top_logprobs", 0, engine::kMaxTopLogprobs)) {
    if (!r.common.logprobs) bad_request("top_logprobs", "'top_logprobs' needs 'logprobs' set to true");
    r.common.top_logprobs = static_cast<int>(*top);
  }
  parse_n_probs(f, "top_logprobs", r.common);
  r.add_generation_prompt = f.boolean("add_generation_prompt").value_or(true);
  parse_chat_extensions(f, r);
  return r;
}

TokenizeRequest parse_tokenize_request(std::string_view body, const ParseLimits& limits) {
  const RequestJson j = parse_json_object(body, limits.json);
  JsonFields f(j);
  f.reject_unknown({"model", "prompt", "messages", "content", "add_special_tokens", "add_special", "parse_special",
                    "add_generation_prompt", "with_pieces"});
  TokenizeRequest r;
  r.model = f.string("model").value_or("");
  const int given = int{f.has("prompt")} + int{f.has("messages")} + int{f.has("content")};
  if (given != 1) bad_request("prompt", "give exactly one of 'prompt', 'messages' and 'content'");
  if (f.has("messages")) {
    r.is_chat = true;
    r.conversation.messages = parse_api_messages(f);
  } else if (f.has("content")) {
    r.llama_shape = true;  // llama.cpp's /tokenize and its defaults
    r.prompt = *f.string("content");
  } else {
    r.prompt = *f.string("prompt");
  }
  const std::optional<bool> add = f.boolean("add_special_tokens"), add_alias = f.boolean("add_special");
  if (add && add_alias && *add != *add_alias)
    bad_request("add_special", "'add_special' and 'add_special_tokens' differ; send one of them");
  r.add_special_tokens = add.value_or(add_alias.value_or(!r.llama_shape));
  r.parse_special = f.boolean("parse_special").value_or(r.llama_shape);
  if (r.is_chat && f.has("parse_special"))
    bad_request("parse_special", "'parse_special' applies to 'prompt' and 'content', not to 'messages'");
  r.add_generation_prompt = f.boolean("add_generation_prompt").value_or(true);
  r.with_pieces = f.boolean("with_pieces").value_or(false);
  return r;
}

DetokenizeRequest parse_detokenize_request(std::string_view body, const ParseLimits& limits) {
  const RequestJson j = parse_json_object(body, limits.json);
  JsonFields f(j);
  f.reject_unknown({"model", "tokens"});
  DetokenizeRequest r;
  r.model = f.string("model").value_or("");
  const RequestJson* tokens = f.find("tokens");
  if (!tokens || !tokens->is_array())
    bad_request("tokens", "'tokens' must be a list of token ids, got {}", tokens ? describe_json(*tokens) : "nothing");
  r.tokens = token_list(*tokens, "tokens", limits);
  return r;
}

}  // namespace tokenmill::server
