// Turns one logits row into one token id, following llama.cpp's default chain:
//   logit bias -> repetition / frequency / presence penalties -> top-k ->
//   typical-p -> top-p -> min-p -> temperature -> draw from the softmax.
// Typical-p, top-p and min-p therefore see the temperature-1 distribution
// (as llama.cpp).
//
// Determinism: each Sampler owns an std::mt19937_64 seeded from params.seed
// and turns its output into a double by hand (not through the library's
// implementation-defined distributions), and every ordering breaks ties by the
// lower token id. Same seed + same logits sequence => same tokens, on any run.
//
// Thread-safety: none; one Sampler per sequence, driven by the engine thread.
// Memory: the own scratch grows on first use to 4 bytes x vocab (the adjusted
// row) plus 8 bytes per candidate (k with top-k, up to vocab without): 3 MiB
// at most for 262144. Many Samplers can share one SamplerScratch instead, and
// Samplers are move-only so that the scratch is never copied by accident.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "sample/sampling_params.h"

namespace tokenmill::sample {

struct Candidate {
  int32_t id;
  float logit;
};

// Buffers reused from call to call so that sampling allocates nothing once warm.
struct SamplerScratch {
  std::vector<float> logits;          // [vocab] adjusted copy of the input row
  std::vector<Candidate> candidates;  // [<= vocab] tokens still in the running
  std::vector<int32_t> window;        // [<= history] sorted penalty window
  std::vector<float> probs;           // [vocab] distribution() output, for callers that need one
  std::vector<float> residual;        // [vocab] speculative verification's rejection residual
};

// Adds params.logit_bias, then applies the repetition, frequency and presence
// penalties over the last params.penalty_last_n tokens of history, in place.
// `window` is scratch. Cost: O(bias + n log n) with n the window length.
// Precondition: every history id is in [0, logits.size()).
void apply_bias_and_penalties(const SamplingParams& params,
                              std::span<float> logits,  // [vocab]
                              std::span<const int32_t> history, std::vector<int32_t>& window);

// Sets logits[i] to -inf for every token whose bit (i % 32) of allowed[i / 32]
// is clear: the grammar mask of constrained decoding, applied first, before
// bias and penalties. allowed: [ceil(vocab / 32)].
void apply_allowed_mask(std::span<const uint32_t> allowed, std::span<float> logits);  // [vocab]

class Sampler {
 public:
  // Throws tokenmill::Error if params.validate(vocab_size) does.
  Sampler(const SamplingParams& params, int32_t vocab_size);
  Sampler(Sampler&&) = default;
  Sampler& operator=(Sampler&&) = default;
  Sampler(const Sampler&) = delete;
  Sampler& operator=(const Sampler&) = delete;

  // Picks the next token. `history` is every previous token of the sequence,
  // prompt included. Throws tokenmill::Error when no token is left to choose
  // (every logit -inf or NaN, e.g. logit_bias banned them all).
  // Cost: a copy and a scan of the row, then one exp per candidate: top-k
  // selects with a k-element heap (no vocab-sized candidate list); top-p
  // without top-k pays one exp per token and sorts only a geometrically grown
  // best-first prefix covering the mass; greedy pays no exp at all.
  int32_t sample(std::span<const float> logits,  // [vocab]
                 std::span<const int32_t> history);
  // `allowed` (when not empty) is the grammar's token mask (see
  // apply_allowed_mask); the other calls below take it the same way.
  int32_t sample(std::span<const float> logits,  // [vocab]
                 std::span<const int32_t> history, SamplerScratch& scratch, std::span<const uint32_t> allowed = {});

  // The stochastic path up to the draw: bias, penalties, top-k, typical-p,
  // top-p and min-p, leaving the survivors in scratch.candidates with their adjusted
  // logits (temperature not applied), best first whenever top-k or top-p ran.
  // Exposed for tests and diagnostics; throws like sample().
  void filter(std::span<const float> logits,  // [vocab]
              std::span<const int32_t> history, SamplerScratch& scratch, std::span<const uint32_t> allowed = {}) const;

  // The distribution sample() draws from, dense: probs[id] after bias,
  // penalties, top-k, typical-p, top-p, min-p and the temperature; 0 for filtered-out
  // tokens; sums to 1. Greedy (temperature 0) is a point mass on the
  // argmax. Speculative decoding's rejection rule compares two of them.
  // Throws like sample().
  void distribution(std::span<const float> logits,  // [vocab]
                    std::span<const int32_t> history, SamplerScratch& scratch, std::vector<float>& probs,
                    std::span<const uint32_t> allowed = {});
  // Draws an id with probability weights[id] / sum(weights) from this
  // sampler's generator. Precondition: weights >= 0 with a positive sum.
  int32_t draw_weighted(std::span<const float> weights);
  // The next uniform number in [0, 1) of this sampler's generator.
  double uniform() { return next_uniform(); }

  // Probability of the last chosen token in the distribution it was drawn from
  // (after every filter and the temperature); 1 for greedy.
  float last_probability() const { return last_probability_; }

  const SamplingParams& params() const { return params_; }
  int32_t vocab_size() const { return vocab_size_; }

 private:
  // Copies logits into scratch.logits and applies bias and penalties there.
  void adjust(std::span<const float> logits,  // [vocab]
              std::span<const int32_t> history, SamplerScratch& scratch, std::span<const uint32_t> allowed) const;
  int32_t sample_greedy(std::span<const float> adjusted);   // [vocab]
  void collect_candidates(std::span<const float> adjusted,  // [vocab]
                          std::vector<Candidate>& cands, bool& sorted) const;
  void keep_typical(std::vector<Candidate>& cands, bool& sorted) const;
  void keep_top_p(std::vector<Candidate>& cands, bool& sorted) const;
  void keep_min_p(std::vector<Candidate>& cands) const;
  int32_t draw(std::span<Candidate> cands);
  double next_uniform();  // in [0, 1)

  SamplingParams params_;
  int32_t vocab_size_;
  std::mt19937_64 rng_;
  SamplerScratch scratch_;
  float last_probability_ = 0.0f;
};

}  // namespace tokenmill::sample
