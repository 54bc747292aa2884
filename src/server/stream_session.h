// Writes one streamed response (SSE) from a running Generation: a chunk per
// token event (with its logprobs when asked; with tools, the content and
// tool_calls deltas its text completes), a last chunk per choice with
// its finish reason, the usage chunk (stream_options.include_usage), then
// "data: [DONE]". Keep-alive comments go out while nothing else does; a
// failed write means the client went away, and every choice is cancelled
// at once so the engine frees its KV blocks at its next step.
//
// A refusal or failure that arrives after the 200 headers were sent is
// written as an error event ({"error": {...}}), which OpenAI clients raise.
//
// Backpressure: when the client has not taken max_unsent_bytes of what was
// written (it stopped reading), every choice is paused in the engine (its
// KV blocks stay, nothing is generated) until the client has caught up to
// half of that; a client that takes nothing for stalled_client_timeout is
// treated as gone and the request cancelled.
//
// Runs on the HTTP worker thread that answers the request; not shared.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "server/generation.h"
#include "server/http_types.h"
#include "server/openai/openai_response.h"
#include "server/request_log.h"

namespace tokenmill::server {

enum class ApiKind { kCompletion, kChat };

struct StreamSpec {
  ApiKind kind = ApiKind::kCompletion;
  ResponseMeta meta;
  bool include_usage = false;
  bool logprobs = false;
  int n = 1;                            // choices per prompt
  std::vector<std::string> echo_texts;  // per prompt (completions with echo), else empty
  std::vector<int64_t> prompt_tokens;   // per prompt
  // Echo with logprobs: the prompts' tokens. Each choice's echo chunk then
  // waits for its first event, which carries the prompt log-probabilities.
  std::vector<std::vector<int32_t>> echo_prompts;
  std::chrono::milliseconds keep_alive{500};
  // Chat with active tools: each choice's text goes through a
  // ToolCallParser and is streamed as content and tool_calls deltas; a
  // choice that stopped after a call ends with finish_reason "tool_calls".
  bool tool_calls = false;
  size_t max_unsent_bytes = 0;  // 0: no backpressure
  std::chrono::milliseconds stalled_client_timeout{30'000};
};

class StreamSession {
 public:
  // gen may be null: every choice then ends at once with "length" (echo
  // with max_tokens 0 has nothing to generate).
  StreamSession(std::unique_ptr<Generation> gen, StreamSpec spec, TokenPieceFn piece, HttpStats& stats);

  // Writes the whole stream. Returns false when the client went away.
  bool run(ResponseStream& out);

 private:
  struct Choice {
    bool done = false;
    bool echoed = false;  // the echo chunk went out (echo_prompts only)
    int64_t offset = 0;   // bytes of text before the next token (completion logprobs)
    engine::FinalEvent final;
    ToolCallParser parser;              // spec_.tool_calls only
    std::vector<std::string> call_ids;  // one per call the parser started
  };

  bool write(ResponseStream& out, const std::string& data);
  // Pauses the choices while the client is behind; false when it stalled.
  bool apply_backpressure(ResponseStream& out);
  void set_paused(bool paused);
  bool write_preamble(ResponseStream& out);
  bool on_event(ResponseStream& out, size_t i, engine::StreamEvent& e);
  bool write_scored_echo(ResponseStream& out, size_t i, const engine::StreamEvent& e);
  bool on_token(ResponseStream& out, size_t i, const engine::TokenEvent& t);
  bool on_final(ResponseStream& out, size_t i, const engine::FinalEvent& f);
  // `last`: the choice's final text (the parser releases what it held).
  nlohmann::json chunk(size_t i, const std::string& text, const nlohmann::json& logprobs,
                       const std::optional<std::string>& finish, bool last = false);
  nlohmann::json chat_delta(size_t i, const std::string& text, bool last);
  bool finish(ResponseStream& out);
  void record(RequestRecord& r) const;
  // After a failed write: cancels every choice and waits up to 2 s for
  // their final events (usage and finish reason for the log line).
  void collect_after_cancel();
  std::optional<engine::StreamEvent> poll(size_t i, bool block);

  std::unique_ptr<Generation> gen_;
  StreamSpec spec_;
  TokenPieceFn piece_;
  HttpStats& stats_;
  std::vector<Choice> choices_;
  bool failed_ = false;   // an error event was written
  bool stalled_ = false;  // the client took nothing for stalled_client_timeout
  std::chrono::steady_clock::time_point last_write_;
};

}  // namespace tokenmill::server
