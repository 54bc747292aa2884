// Per-position quantities of next-token distributions, in double precision
// (a 262144-entry vocabulary makes float sums of probabilities lose ~1e-4).
#pragma once

#include <cstdint>
#include <vector>

namespace tokenmill::eval {

// log of sum_i exp(logits[i]) over n entries (stable: max subtracted).
double log_sum_exp(const float* logits, int64_t n);
// -log p(target) under softmax(logits).
double negative_log_likelihood(const float* logits, int64_t n, int32_t target);
// KL(P || Q) = sum_i p_i (log p_i - log q_i) for P = softmax(p_logits),
// Q = softmax(q_logits); >= 0 up to rounding (negative rounding is clamped to 0).
double kl_divergence(const float* p_logits, const float* q_logits, int64_t n);
// Index of the largest logit (the first one on ties).
int32_t argmax(const float* logits, int64_t n);

}  // namespace tokenmill::eval
