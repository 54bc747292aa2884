// What a request may ask of this engine (RequestLimits), and the check
// submit() makes against them without the engine thread (check_request).
#pragma once

#include <cstdint>
#include <optional>

#include "engine/output_stream.h"
#include "engine/request.h"
#include "sched/admission.h"

namespace tokenmill::engine {

// What submit() can check without the engine thread.
struct RequestLimits {
  int32_t n_vocab = 0;
  sched::CapacityLimits capacity;  // capacity.max_seqs also bounds GenerateRequest::n
  bool has_tokenizer = false;
  // Embedding requests need the final hidden states on the root: not with a
  // pipeline, whose last stage is another process.
  bool embeddings = true;
  // What a request's own KV policy must combine with.
  bool speculation = false;  // the engine drafts (EngineConfig::spec)
  bool parallel = false;     // tensor or pipeline parallel model
  int64_t max_model_len() const { return capacity.max_model_len; }
  // Completion tokens a request may run to when it names none (a chat
  // without max_tokens): what the context, the KV pool and each of its
  // `num_samples` shares of it leave after a prompt of `prompt_tokens`.
  int64_t completion_room(int64_t prompt_tokens, int64_t num_samples) const {
    return sched::default_completion_tokens(capacity, prompt_tokens, num_samples);
  }
};

// nullopt when the request may be queued; else why it is refused at once
// (kInvalid, or what sched::never_fits says) and a message naming the
// problem.
using sched::Refusal;
std::optional<Refusal> check_request(const GenerateRequest& request, const RequestLimits& limits);

}  // namespace tokenmill::engine
