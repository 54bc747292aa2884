// One llama.cpp-style generation (POST /completion, /infill): every prompt
// times n submitted to the engine (generation.h), a slot of the board held
// per choice while it runs, and the answer written in llama.cpp's shape
// (llamacpp_response.h): one object or, for several choices, a list; or a
// stream of SSE chunks `data: {...}` with "stop": false and, per choice, a
// last chunk with "stop": true and the summary. As llama.cpp does for this
// endpoint, the stream ends without "data: [DONE]".
//
// A refusal before the answer starts is thrown as ApiError (the HTTP
// status); one after the stream's headers went out is written as an
// {"error": {...}} event. A client that leaves cancels every choice;
// a client that stops reading pauses them (backpressure), as the OpenAI
// streams do (stream_session.h).
//
// Runs on the HTTP worker thread that answers the request; not shared.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/generation.h"
#include "server/http_types.h"
#include "server/llamacpp/llamacpp_request.h"
#include "server/llamacpp/llamacpp_response.h"
#include "server/llamacpp/llamacpp_slots.h"
#include "server/serving_context.h"

namespace tokenmill::server {

struct LlamaJob {
  std::vector<std::vector<int32_t>> prompts;  // tokenized, >= 1
  std::vector<std::string> prompt_texts;      // per prompt, as the model sees it
  int n = 1;                                  // choices per prompt
  engine::GenerateRequest request;            // prompt and n are set per prompt
  LlamaResponseSpec spec;
  int wanted_slot = -1;  // id_slot
};

class LlamaSession {
 public:
  // Submits the job and leases a slot per choice.
  LlamaSession(ServingContext& ctx, engine::Engine& engine, SlotBoard& board, LlamaJob job);

  // Throws the ApiError of a choice the engine refused (generation.h).
  void wait_first_events(std::chrono::steady_clock::time_point deadline) { gen_.wait_first_events(deadline); }

  // Waits for every choice: one object, or a list of them. Throws the
  // ApiError of a failed choice; nullopt when the client went away (every
  // choice is then cancelled).
  std::optional<nlohmann::json> run_whole(const HttpRequest& req);

  // Writes the whole stream; false when the client went away.
  bool run_stream(ResponseStream& out);

 private:
  struct Choice {
    LlamaChoice out;
    SlotBoard::Lease lease;
    bool done = false;
  };

  // Adds one event to its choice; true for the final event.
  bool absorb(size_t i, engine::StreamEvent& e);
  std::optional<engine::StreamEvent> next_event(size_t i, std::chrono::milliseconds wait);
  bool write(ResponseStream& out, const std::string& data);
  bool keep_up(ResponseStream& out);
  bool stream_event(ResponseStream& out, size_t i, engine::StreamEvent& e);
  void cancel_and_collect();
  void record(bool client_left) const;

  ServingContext& ctx_;
  LlamaJob job_;
  Generation gen_;
  TokenPieceFn piece_;
  std::vector<Choice> choices_;
  bool failed_ = false;  // an error event was written
  std::chrono::steady_clock::time_point last_write_;
};

}  // namespace tokenmill::server
