// OpenAI's stream shape (SSE) for /v1/completions and /v1/chat/completions:
// a chunk per token event (with its logprobs when asked; with tools, the
// content and tool_calls deltas its text completes), a last chunk per
// choice with its finish reason and timings, the usage chunk
// (stream_options.include_usage), then "data: [DONE]". The stream itself
// (polling, keep-alive, backpressure, cancellation) is the pipeline's
// (generation_stream.h).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "server/chat_output.h"
#include "server/generation_stream.h"
#include "server/openai/openai_response.h"

namespace tokenmill::server {

enum class ApiKind { kCompletion, kChat };

struct StreamSpec {
  ApiKind kind = ApiKind::kCompletion;
  ResponseMeta meta;
  bool include_usage = false;
  bool logprobs = false;
  int n = 1;                            // choices per prompt
  std::vector<std::string> echo_texts;  // per prompt (completions with echo), else empty
  // Echo with logprobs: the prompts' tokens. Each choice's echo chunk then
  // waits for its first event, which carries the prompt log-probabilities.
  std::vector<std::vector<int32_t>> echo_prompts;
  // Chat: when output.active(), each choice's text goes through a
  // ChatOutputParser and is streamed as reasoning_content, content and
  // tool_calls deltas; a choice that stopped after a call ends with
  // finish_reason "tool_calls".
  ChatOutputFormat output;
};

class OpenAiStream : public StreamShape {
 public:
  OpenAiStream(StreamSpec spec, size_t num_choices, TokenPieceFn piece);

  std::string preamble() override;
  std::string on_token(size_t i, const engine::TokenEvent& t) override;
  std::string on_final(size_t i, const engine::FinalEvent& f) override;
  std::string epilogue(std::span<const engine::FinalEvent> finals, bool failed) override;

 private:
  struct Choice {
    bool echoed = false;                     // the echo chunk went out (echo_prompts only)
    int64_t offset = 0;                      // bytes of text before the next token (completion logprobs)
    std::optional<ChatOutputParser> parser;  // spec_.output.active() only
    std::vector<std::string> call_ids;       // one per call the parser started
  };

  // The echo chunk of a choice whose prompt is scored, once its first
  // event brought the prompt's log-probabilities; "" when already sent.
  std::string scored_echo(size_t i, const std::vector<engine::TokenLogprob>& prompt_logprobs);
  // `last`: the choice's final text (the parser releases what it held).
  nlohmann::json chunk(size_t i, const std::string& text, const nlohmann::json& logprobs,
                       const std::optional<std::string>& finish, bool last = false);
  nlohmann::json chat_delta(size_t i, const std::string& text, bool last);

  StreamSpec spec_;
  TokenPieceFn piece_;
  std::vector<Choice> choices_;
};

}  // namespace tokenmill::server
