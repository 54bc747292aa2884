#include "eval/logit_math.h"

#include <algorithm>
#include <cmath>

namespace tokenmill::eval {

double log_sum_exp(const float* logits, int64_t n) {
  const float mx = *std::max_element(logits, logits + n);
  double s = 0.0;
  for (int64_t i = 0; i < n; ++i) s += std::exp(double(logits[i]) - mx);
  return mx + std::log(s);
}

double negative_log_likelihood(const float* logits, int64_t n, int32_t target) {
  return log_sum_exp(logits, n) - logits[target];
}

double kl_divergence(const float* p_logits, const float* q_logits, int64_t n) {
  const double lp = log_sum_exp(p_logits, n), lq = log_sum_exp(q_logits, n);
  double kl = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const double log_p = p_logits[i] - lp;
    const double log_q = q_logits[i] - lq;
    kl += std::exp(log_p) * (log_p - log_q);
  }
  return std::max(kl, 0.0);
}

int32_t argmax(const float* logits, int64_t n) {
  return static_cast<int32_t>(std::max_element(logits, logits + n) - logits);
}

}  // namespace tokenmill::eval
