// Streams a running Generation to the client in an API's shape. The stream
// itself is the same for every API and lives here, once: one worker thread
// polls the choices' engine events and hands each to the API's StreamShape,
// which turns it into the text to send (an SSE event in OpenAI's or
// llama.cpp's shape); keep-alive comments go out while nothing else does;
// a refusal or failure after the 200 headers is written as the shape's
// error event and ends every choice; a failed write means the client went
// away, and every choice is cancelled at once so the engine frees its KV
// blocks at its next step.
//
// Backpressure: when the client has not taken max_unsent_bytes of what was
// written (it stopped reading), every choice is paused in the engine (its
// KV blocks stay, nothing is generated) until the client has caught up to
// half of that; a client that takes nothing for stalled_client_timeout is
// treated as gone and the request cancelled.
//
// The request's log record gets the usage, finish reason and timings.
// Runs on the HTTP worker thread that answers the request; not shared.
#pragma once

#include <chrono>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "server/generation.h"
#include "server/http_types.h"

namespace tokenmill::server {

struct ServingContext;

// An API's side of a stream: the text each event becomes. Every method
// returns what to write ("" for nothing).
class StreamShape {
 public:
  virtual ~StreamShape() = default;
  // Before any event (OpenAI's chat role chunks, an echo).
  virtual std::string preamble() { return {}; }
  // A token of choice i.
  virtual std::string on_token(size_t i, const engine::TokenEvent& token) = 0;
  // The normal end (stop, length, timeout) of choice i.
  virtual std::string on_final(size_t i, const engine::FinalEvent& final) = 0;
  // A choice refused or failed after the headers went out; the stream ends.
  virtual std::string on_failure(const ApiError& error) { return sse_event(error.to_json()); }
  // After the last event (a usage chunk, "data: [DONE]"); `failed`: an
  // error event (on_failure) ended the stream.
  virtual std::string epilogue(std::span<const engine::FinalEvent> /*finals*/, bool /*failed*/) { return {}; }
};

struct StreamLimits {
  std::chrono::milliseconds keep_alive{500};
  size_t max_unsent_bytes = 0;  // 0: no backpressure
  std::chrono::milliseconds stalled_client_timeout{30'000};
};

// The server's stream settings (ServingContext::keep_alive and policy).
StreamLimits stream_limits(const ServingContext& ctx);

class GenerationStream {
 public:
  // gen may be null: every choice then ends at once with "length" (echo
  // with max_tokens 0 has nothing to generate); prompt_tokens gives each
  // prompt's size for that case and for a client that leaves early.
  GenerationStream(std::unique_ptr<Generation> gen, int n, std::span<const std::vector<int32_t>> prompts,
                   StreamShape& shape, StreamLimits limits, HttpStats& stats);

  // Writes the whole stream. Returns false when the client went away.
  bool run(ResponseStream& out);

 private:
  struct Choice {
    bool done = false;
    engine::FinalEvent final;
  };

  bool write(ResponseStream& out, const std::string& data);
  // Pauses the choices while the client is behind; false when it stalled.
  bool apply_backpressure(ResponseStream& out);
  void set_paused(bool paused);
  bool on_event(ResponseStream& out, size_t i, engine::StreamEvent& e);
  // One pass over the choices; false when the stream must end.
  bool poll_choices(ResponseStream& out, bool& all_done, bool& progressed);
  std::optional<engine::StreamEvent> poll(size_t i, bool block);
  // After a failed write: cancels every choice and waits up to 2 s for
  // their final events (usage and finish reason for the log line).
  void collect_after_cancel();
  std::vector<engine::FinalEvent> finals() const;

  std::unique_ptr<Generation> gen_;
  int n_ = 1;
  StreamShape& shape_;
  StreamLimits limits_;
  HttpStats& stats_;
  std::vector<Choice> choices_;
  bool failed_ = false;   // an error event was written
  bool stalled_ = false;  // the client took nothing for stalled_client_timeout
  std::chrono::steady_clock::time_point last_write_;
};

}  // namespace tokenmill::server
