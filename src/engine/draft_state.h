// A request's side of speculative decoding: how many tokens it may draft,
// its running acceptance rate (for adaptive k), the tally reported in its
// final event, and, for drafts from a model (self-speculation), the draft
// generator and the distribution q each draft token was drawn from, which
// verification's rejection rule needs (spec/rejection_rule.h).
//
// The draft generator is the request's own seed mixed with a constant: a
// second, independent stream, so drafting never consumes the draws of the
// request's sampler (which verification uses, exactly as plain decoding
// would).
//
// Memory: q is kept only for sampled requests drafting from a model: 4
// bytes x vocab per draft token (1 MiB per token for a 262144-token
// vocabulary), reused from step to step.
//
// Thread-safety: engine thread only.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/output_stream.h"
#include "sample/sampler.h"
#include "spec/cost_model.h"

namespace tokenmill::engine {

class DraftState {
 public:
  // max_draft: GenerateRequest::spec_max_draft (-1: the engine's k).
  DraftState(const sample::SamplingParams& params, int32_t n_vocab, int max_draft);

  // The most draft tokens for this request, given the engine's k.
  int max_draft(int engine_k) const { return max_draft_ < 0 ? engine_k : std::min(max_draft_, engine_k); }

  // A new draft begins (any proposer): the distributions of the last one
  // are dropped.
  void begin_draft() { num_probs_ = 0; }
  // Draft token j from a draft model's logits row: a draw from the
  // request's sampling distribution q (kept for verification) with the
  // draft generator, or its argmax for greedy requests. `history` is every
  // token before position j (prompt, output, draft tokens 0..j). Should the
  // sampler fail (every token banned), the draft is the last history token
  // with q a point mass on it: any draft is safe, verification decides.
  int32_t draft_token(std::span<const float> logits,  // [vocab]
                      std::span<const int32_t> history, size_t j, sample::SamplerScratch& scratch);
  // q of draft token j, when the draft came with distributions (sampled
  // requests drafting from a model); empty otherwise, and verification then
  // treats the token as a point mass.
  std::span<const float> probs(size_t j) const;

  // The tally of one verification, and the acceptance estimate it feeds.
  void note_verified(int64_t drafted, int64_t accepted);
  // A decoding step without a draft.
  void note_idle() {
    acceptance_.idle();
    ++idle_steps_;
  }
  // This request's acceptance estimate, with `prior` (the engine's
  // estimate over all requests) standing in for evidence it lacks.
  double acceptance(double prior) const { return acceptance_.alpha(prior); }
  // Decoding steps since its last draft (spec::kProbeInterval).
  int idle_steps() const { return idle_steps_; }
  const SpecStats& stats() const { return stats_; }

 private:
  int max_draft_;
  int32_t n_vocab_;
  bool sampled_;
  sample::Sampler sampler_;
  std::vector<float> probs_;  // [draft token, vocab] rows of the current draft
  size_t num_probs_ = 0;
  spec::AcceptanceEstimate acceptance_;
  int idle_steps_ = 0;
  SpecStats stats_;
};

}  // namespace tokenmill::engine
