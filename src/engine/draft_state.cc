#include "engine/draft_state.h"

#include <algorithm>

#include "util/check.h"
#include "util/error.h"

namespace tokenmill::engine {
namespace {

sample::SamplingParams draft_params(sample::SamplingParams params) {
  params.seed ^= 0x9e3779b97f4a7c15ULL;  // an independent stream for the draft
  return params;
}

}  // namespace

DraftState::DraftState(const sample::SamplingParams& params, int32_t n_vocab, int max_draft)
    : max_draft_(max_draft),
      n_vocab_(n_vocab),
      sampled_(params.temperature > 0.0f),
      sampler_(draft_params(params), n_vocab) {}

int32_t DraftState::draft_token(std::span<const float> logits, std::span<const int32_t> history, size_t j,
                                sample::SamplerScratch& scratch) {
  TM_CHECK(j == num_probs_ || !sampled_);
  if (!sampled_) {
    try {
      return sampler_.sample(logits, history, scratch);
    } catch (const Error&) {
      return history.back();
    }
  }
  const auto vocab = static_cast<size_t>(n_vocab_);
  probs_.resize(std::max(probs_.size(), (j + 1) * vocab));
  const std::span<float> q(probs_.data() + j * vocab, vocab);
  num_probs_ = j + 1;
  int32_t token = 0;
  try {
    sampler_.distribution(logits, history, scratch, scratch.probs);
    std::copy(scratch.probs.begin(), scratch.probs.end(), q.begin());
    return sampler_.draw_weighted(q);
  } catch (const Error&) {
    token = history.back();
  }
  std::fill(q.begin(), q.end(), 0.0f);
  q[static_cast<size_t>(token)] = 1.0f;
  return token;
}

std::span<const float> DraftState::probs(size_t j) const {
  if (j >= num_probs_) return {};
  const auto vocab = static_cast<size_t>(n_vocab_);
  return {probs_.data() + j * vocab, vocab};
}

void DraftState::note_verified(int64_t drafted, int64_t accepted) {
  stats_.draft_tokens += drafted;
  stats_.accepted_tokens += accepted;
  acceptance_.observe(drafted, accepted);
  idle_steps_ = 0;
}

}  // namespace tokenmill::engine
