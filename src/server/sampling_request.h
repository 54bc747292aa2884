// What every generation API asks of the engine once its own request shape
// is parsed: the sampling fields, limits, output constraint and the
// extensions applied to the tokenized prompt. The API rooms (openai/,
// llamacpp/) fill a SamplingRequest; the generation pipeline
// (generation_job.h) turns it into an engine request.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/request.h"
#include "grammar/constraint.h"
#include "kv/kv_policy.h"
#include "sample/sampling_params.h"
#include "util/bounded_json.h"

namespace tokenmill::server {

inline constexpr int kMaxChoices = 16;            // n, per prompt
inline constexpr int kMaxPromptsPerRequest = 64;  // a list of prompts
inline constexpr size_t kMaxLogitBias = 1024;
inline constexpr double kMaxTemperature = 2.0;  // OpenAI's range
inline constexpr double kMaxAbsLogitBias = 100.0;

struct ParseLimits {
  int32_t n_vocab = 0;  // token ids must lie in [0, n_vocab)
  // How a body's JSON is parsed: keys per object, memory per request and
  // the server's shared parse budget (ServingContext::parse_limits).
  util::JsonLimits json;
};

// One prompt as the client gave it: text, or token ids.
struct PromptInput {
  bool is_text = true;
  std::string text;
  std::vector<int32_t> tokens;
};

// What the output must match, as one request field gave it. `param` names
// that field ("response_format", "guided_json", "structured_outputs", ...):
// it is the `param` of the 400 a failed compilation answers with.
struct OutputConstraint {
  grammar::ConstraintSpec spec;
  std::string param;
};

// The fields /v1/completions and /v1/chat/completions share.
struct SamplingRequest {
  std::string model;                  // "" when absent
  std::optional<int64_t> max_tokens;  // absent: the endpoint's default
  sample::SamplingParams sampling;    // seed is meaningful only when seed_given
  bool seed_given = false;
  int n = 1;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  bool logprobs = false;
  int top_logprobs = 0;
  engine::Priority priority = engine::Priority::kNormal;  // extension
  // Extension, named as llama.cpp's server names it: "speculative.n_max",
  // the most draft tokens verified per step for this request (0: none); -1
  // (absent) leaves the server's --spec-k.
  int spec_max_draft = -1;
  // Extension: this request's long-context KV policy (kv/kv_policy.h),
  // "kv_policy": "full" | "streaming" | "h2o" or an object {"type", "sinks",
  // "window", "budget", "positions"}; absent: the server's --kv-policy.
  std::optional<kv::KvPolicy> kv_policy;
  // At most one output constraint per request; nullopt = free text.
  std::optional<OutputConstraint> constraint;
  // Extension: the request's deadline in seconds from its arrival (queued
  // past it: 503 deadline_expired; running: finish_reason "timeout").
  std::optional<double> timeout_s;

  // Extension fields the handler applies once the prompt is tokens
  // (request_extensions.h; the others go straight into `sampling`):
  std::vector<std::string> bad_words;      // vLLM's; tokenized into sampling.bad_words_ids
  std::optional<bool> add_special_tokens;  // absent: the endpoint's default (completions true, chat false)
  int prompt_logprobs = -1;                // vLLM's; in [0, kMaxTopLogprobs], -1 = off; never with stream
  // vLLM's: keep only the last k prompt tokens; -1: the context length.
  std::optional<int64_t> truncate_prompt_tokens;
  // llama.cpp's: a prompt too long for the context keeps its first n_keep
  // tokens and loses tokens from the middle; -1 = keep all (no truncation).
  std::optional<int64_t> n_keep;
  bool max_tokens_to_context = false;  // llama.cpp's n_predict -1: until the context is full
};

// "high" | "normal" | "low" or 0 | 1 | 2; nullopt for anything else.
std::optional<engine::Priority> parse_priority_name(std::string_view name);

}  // namespace tokenmill::server
