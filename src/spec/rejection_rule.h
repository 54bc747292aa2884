// Verification of a sampled draft token: the rejection rule of speculative
// sampling (Leviathan et al. 2023; Chen et al. 2023). A draft token d drawn
// from the proposer's distribution q is kept with probability
// min(1, p(d) / q(d)), p the target's distribution at that position; when it
// is not, the token is drawn from normalize(max(0, p - q)) instead. The
// emitted token then follows p exactly, whatever q is: speculation changes
// the speed, never the distribution.
//
// p and q are the request's full sampling distributions (sample::Sampler::
// distribution: bias, penalties, top-k/top-p/min-p and temperature applied
// to each model's logits), so the rule holds for every sampling setting.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace tokenmill::spec {

struct DraftVerdict {
  bool accepted = false;
  // When !accepted: the weights to draw the replacement from (max(0, p - q),
  // unnormalised; p itself in the rounding corner where that is all zero).
  // Draw with the request's own generator (Sampler::draw_weighted).
  std::vector<float>* residual = nullptr;
};

// `u` is a uniform number in [0, 1) from the request's generator; `residual`
// is scratch of any size. Preconditions: p and q the same size, draft inside
// it, q(draft) > 0 (the draft was drawn from q).
DraftVerdict judge_draft(std::span<const float> p, std::span<const float> q, int32_t draft, double u,
                         std::vector<float>& residual);

}  // namespace tokenmill::spec
