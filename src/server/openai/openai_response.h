// Engine results -> OpenAI response bodies and streaming chunks:
// text_completion, chat.completion, chat.completion.chunk; usage with
// prompt_tokens_details.cached_tokens; the `timings` extension; logprobs in
// the legacy completions shape and in the chat shape; finish reasons.
// Pure functions of their inputs (a token's bytes come from a callback), so
// they are unit-tested without a model.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/output_stream.h"
#include "server/generation.h"
#include "server/http_types.h"
#include "server/tools/tool_call_parser.h"

namespace tokenmill::server {

// The raw bytes a token stands for (possibly part of a UTF-8 character).
using TokenPieceFn = std::function<std::string(int32_t)>;

// The identity shared by every body and chunk of one response.
struct ResponseMeta {
  std::string id;       // "cmpl-..." / "chatcmpl-..."
  int64_t created = 0;  // Unix seconds
  std::string model;    // the name the client asked for (or the served name)
};

// {"prompt_tokens", "completion_tokens", "total_tokens",
//  "prompt_tokens_details": {"cached_tokens"}}
nlohmann::json usage_json(const engine::Usage& usage);

// The `timings` extension: queue_ms, prompt_ms (prefill), ttft_ms,
// decode_ms, tpot_ms, e2e_ms, decode_tokens_per_s, cached_prompt_tokens.
nlohmann::json timings_json(const engine::Timings& t, const engine::Usage& usage, const engine::SpecStats& spec);

// A token as a JSON-safe string: its text when it is valid UTF-8, else
// "bytes:\xe2\x80" (OpenAI's spelling for partial characters).
std::string token_display(std::string_view piece);

// Legacy completions logprobs: {"tokens", "token_logprobs", "top_logprobs",
// "text_offset"}. top_logprobs[i] maps token text -> logprob for the
// alternatives plus the chosen token (OpenAI returns up to logprobs + 1).
// text_offset counts bytes from the start of the returned text; offset0 is
// where the first token starts (the prompt's length with echo).
// Precondition: tokens.size() == logprobs.size().
nlohmann::json completion_logprobs_json(const std::vector<int32_t>& tokens,
                                        const std::vector<engine::TokenLogprob>& logprobs, int64_t offset0,
                                        const TokenPieceFn& piece);

// Echoed prompt tokens in the legacy shape (echo with logprobs): the first
// token's logprob and top_logprobs are null (nothing predicts it), token i's
// come from prompt_logprobs[i - 1] (engine FinalEvent::prompt_logprobs).
// text_offset counts the bytes of the listed token strings from 0, so
// text_offset[i] == bytes of tokens[0..i) joined; the generated tokens that
// follow continue from pieces_size(prompt) (pass it as their offset0).
nlohmann::json prompt_logprobs_json(const std::vector<int32_t>& prompt,
                                    const std::vector<engine::TokenLogprob>& prompt_logprobs,
                                    const TokenPieceFn& piece);
// Total bytes of the tokens' pieces.
int64_t pieces_size(const std::vector<int32_t>& tokens, const TokenPieceFn& piece);
// Appends every array of `more` to the matching array of `into` (both in
// the legacy completions shape).
void append_logprobs_json(nlohmann::json& into, const nlohmann::json& more);

// vLLM's prompt_logprobs: one entry per prompt token, null for the first
// (nothing predicts it), then {"<token id>": {"logprob", "rank",
// "decoded_token"}} holding the prompt token itself and the `top` best
// alternatives (fewer entries when the token is among them). Ranks count
// from 1; prompt_logprobs[i - 1] is token i's (FinalEvent::prompt_logprobs).
nlohmann::json vllm_prompt_logprobs_json(const std::vector<int32_t>& prompt,
                                         const std::vector<engine::TokenLogprob>& prompt_logprobs, int top,
                                         const TokenPieceFn& piece);

// Chat logprobs: {"content": [{"token", "logprob", "bytes", "top_logprobs":
// [{"token", "logprob", "bytes"}]}], "refusal": null}.
nlohmann::json chat_logprobs_json(const std::vector<int32_t>& tokens, const std::vector<engine::TokenLogprob>& logprobs,
                                  const TokenPieceFn& piece);

// One finished choice of a non-streaming response.
struct ChoiceOutput {
  int index = 0;
  std::string text;
  std::string finish_reason;
  nlohmann::json logprobs;  // null unless asked for
  // Chat with tools: the message's tool_calls array (null: none), and
  // whether its content is null (only calls, no text).
  nlohmann::json tool_calls;
  bool null_content = false;
  // vLLM's prompt_logprobs (vllm_prompt_logprobs_json); null unless asked
  // for. Completions put it in the choice, chat at the top of the body
  // (from the first choice: a chat has one prompt), as vLLM does.
  nlohmann::json prompt_logprobs;
  // The model's reasoning, apart from the content ("reasoning_content",
  // DeepSeek's field; omitted when empty).
  std::string reasoning;
};

// The tool calls of a message: [{"id", "type": "function", "function":
// {"name", "arguments"}}]; ids[i] is call i's id ("call_" + 24 hex).
// Precondition: ids.size() >= calls.size().
nlohmann::json tool_calls_json(const std::vector<ToolCallOutput>& calls, const std::vector<std::string>& ids);

// A streamed chat delta from parsed output: "content" when there is text,
// "tool_calls" [{"index", "id", "type", "function": {"name", "arguments"}}]
// for a call's first piece and [{"index", "function": {"arguments"}}] for
// later ones. ids[index] is the call's id. An empty object when `piece`
// is empty.
nlohmann::json tool_delta_json(const ParsedOutput& piece, const std::vector<std::string>& ids);

nlohmann::json completion_response(const ResponseMeta& meta, const std::vector<ChoiceOutput>& choices,
                                   const nlohmann::json& usage, const nlohmann::json& timings);
nlohmann::json chat_response(const ResponseMeta& meta, const std::vector<ChoiceOutput>& choices,
                             const nlohmann::json& usage, const nlohmann::json& timings);

// Streaming chunks. finish_reason: null until the choice's last chunk.
// include_usage: the chunk carries "usage": null (OpenAI's shape when the
// client asked for stream_options.include_usage).
nlohmann::json completion_chunk(const ResponseMeta& meta, int index, const std::string& text,
                                const nlohmann::json& logprobs, const std::optional<std::string>& finish_reason,
                                bool include_usage);
nlohmann::json chat_chunk(const ResponseMeta& meta, int index, const nlohmann::json& delta,
                          const nlohmann::json& logprobs, const std::optional<std::string>& finish_reason,
                          bool include_usage);
// The last chunk before [DONE] with stream_options.include_usage: no
// choices, the usage and the timings. object: "text_completion" or
// "chat.completion.chunk".
nlohmann::json usage_chunk(const ResponseMeta& meta, const std::string& object, const nlohmann::json& usage,
                           const nlohmann::json& timings);

}  // namespace tokenmill::server
