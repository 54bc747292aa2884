// One llama.cpp-style generation (POST /completion, /infill) in llama.cpp's
// shape (llamacpp_response.h): a slot of the board held per choice while it
// runs; the answer one object or, for several choices, a list; or a stream
// of SSE chunks `data: {...}` with "stop": false and, per choice, a last
// chunk with "stop": true and the summary. As llama.cpp does for this
// endpoint, the stream ends without "data: [DONE]".
//
// The generation itself is the pipeline's (generation.h, and
// generation_stream.h for a stream: keep-alive, backpressure, a client
// that leaves, an error after the headers). A refusal before the answer
// starts is thrown as ApiError (the HTTP status).
//
// Runs on the HTTP worker thread that answers the request; not shared.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/generation.h"
#include "server/generation_job.h"
#include "server/generation_stream.h"
#include "server/llamacpp/llamacpp_request.h"
#include "server/llamacpp/llamacpp_response.h"
#include "server/llamacpp/llamacpp_slots.h"
#include "server/serving_context.h"

namespace tokenmill::server {

struct LlamaJob {
  GenerationJob gen;                      // prepared (prepare_job)
  std::vector<std::string> prompt_texts;  // per prompt, as the model sees it
  LlamaResponseSpec spec;
  int wanted_slot = -1;  // id_slot
};

class LlamaSession : public StreamShape {
 public:
  // Leases a slot per choice (the first one `wanted_slot` when free).
  LlamaSession(ServingContext& ctx, SlotBoard& board, LlamaJob job);

  // Submits the job and waits for every choice: one object, or a list of
  // them. Throws the ApiError of a failed choice; nullopt when the client
  // went away (every choice is then cancelled).
  std::optional<nlohmann::json> run_whole(engine::Engine& engine, const HttpRequest& req);

  // The shape of a stream (generation_stream.h).
  std::string on_token(size_t i, const engine::TokenEvent& t) override;
  std::string on_final(size_t i, const engine::FinalEvent& f) override;

  const LlamaJob& job() const { return job_; }

 private:
  struct Choice {
    LlamaChoice out;
    SlotBoard::Lease lease;
  };

  ServingContext& ctx_;
  LlamaJob job_;
  TokenPieceFn piece_;
  std::vector<Choice> choices_;
};

}  // namespace tokenmill::server
