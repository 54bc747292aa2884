// OpenAI request bodies -> validated plain structs, before any model work:
// POST /v1/completions, /v1/chat/completions, /tokenize, /detokenize.
// Pure functions of the body and a few limits, so they are unit-tested and
// fuzzed without a model (fuzz/fuzz_openai_request.cc).
//
// Every problem throws ApiError 400 with `param` naming the field: malformed
// JSON, wrong types, out-of-range values, unknown fields (OpenAI's own API
// refuses them too; a typo such as "max_token" must not be ignored: the
// error suggests the nearest known field), features the server does not
// support ("'X' is not supported": suffix, non-text content, beam search).
// The common extensions of vLLM, llama.cpp and OpenAI's newer fields are
// accepted with their meaning (request_extensions.h).
// Output constraints (response_format and the vLLM / llama.cpp extensions)
// and tools are parsed here too; compiling them into a grammar needs the
// vocabulary and happens in the handler (structured_output.h).
// Checks that need the tokenized prompt (context length) happen later, in
// the engine's check_request.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kv/kv_policy.h"
#include "server/json_fields.h"

#include "engine/request.h"
#include "grammar/constraint.h"
#include "sample/sampling_params.h"
#include "tokenizer/chat_template.h"

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

// One entry of `tools` (only "type": "function" exists).
struct ToolDefinition {
  std::string name;         // ^[a-zA-Z0-9_-]{1,64}$, unique within the request
  std::string description;  // "" when absent
  RequestJson parameters;   // a JSON Schema object; {"type": "object", "properties": {}} when absent
  bool strict = false;      // accepted; the arguments are always constrained to `parameters`
};

enum class ToolChoiceMode { kNone, kAuto, kRequired, kNamed };

// `tools`, `tool_choice` and `parallel_tool_calls` of a chat request.
struct ToolsRequest {
  std::vector<ToolDefinition> tools;
  ToolChoiceMode mode = ToolChoiceMode::kAuto;
  std::string named;  // kNamed: a declared tool's name
  bool parallel = true;

  // Whether the output is generated and parsed as tool calls: tools were
  // declared and tool_choice is not "none".
  bool active() const { return !tools.empty() && mode != ToolChoiceMode::kNone; }
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

struct CompletionRequest {
  SamplingRequest common;
  std::vector<PromptInput> prompts;  // >= 1
  bool echo = false;
};

struct ChatRequest {
  SamplingRequest common;
  // >= 1, ready for the chat template: roles system|user|assistant only.
  // Tool definitions (when tools are active) are rendered into a system
  // message, prior tool calls into their assistant turns and tool results
  // into user turns (tool_prompt.h).
  std::vector<tokenizer::ChatMessage> messages;
  ToolsRequest tools;                   // never active together with common.constraint
  bool add_generation_prompt = true;    // extension (vLLM's name; also chat_template_kwargs.add_generation_prompt)
  bool continue_final_message = false;  // extension (vLLM's): the last assistant message is continued
};

// Two shapes: tokenmill's {"prompt" | "messages", "add_special_tokens"}
// and llama.cpp's {"content", "add_special" (default false),
// "parse_special" (default true)}, which is answered in llama.cpp's shape.
struct TokenizeRequest {
  std::string model;
  bool is_chat = false;
  bool llama_shape = false;                      // the text came as "content"
  std::string prompt;                            // !is_chat ("prompt" or "content")
  std::vector<tokenizer::ChatMessage> messages;  // is_chat; rendered as ChatRequest::messages
  bool add_special_tokens = true;
  bool parse_special = false;  // special-token texts become those tokens
  bool add_generation_prompt = true;
  bool with_pieces = false;  // also return each token's text
};

struct DetokenizeRequest {
  std::string model;
  std::vector<int32_t> tokens;
};

CompletionRequest parse_completion_request(std::string_view body, const ParseLimits& limits);
ChatRequest parse_chat_request(std::string_view body, const ParseLimits& limits);
TokenizeRequest parse_tokenize_request(std::string_view body, const ParseLimits& limits);
DetokenizeRequest parse_detokenize_request(std::string_view body, const ParseLimits& limits);

// "high" | "normal" | "low" or 0 | 1 | 2; nullopt for anything else.
std::optional<engine::Priority> parse_priority_name(std::string_view name);

}  // namespace tokenmill::server
