#include "spec/cost_model.h"

#include <algorithm>
#include <cmath>

namespace tokenmill::spec {

void AcceptanceEstimate::observe(int64_t drafted, int64_t accepted) {
  if (drafted <= 0) return;
  successes_ = successes_ * forget_ + static_cast<double>(accepted);
  // Every accepted token is a trial; so is the first rejected one (a fully
  // accepted draft ends with no failure).
  trials_ = trials_ * forget_ + static_cast<double>(accepted) + (accepted < drafted ? 1.0 : 0.0);
}

void AcceptanceEstimate::idle() {
  successes_ *= kIdleForget;
  trials_ *= kIdleForget;
}

double AcceptanceEstimate::alpha(double prior) const {
  return (successes_ + prior * kPriorTrials) / (trials_ + kPriorTrials);
}

void SpecCostModel::observe_step(int64_t tokens, double ms) {
  if (tokens <= 0 || !(ms > 0.0)) return;
  fit_.observe(static_cast<double>(tokens), ms);
}

void SpecCostModel::observe_draft(int64_t tokens, double ms) {
  if (tokens <= 0) return;
  draft_tokens_ = draft_tokens_ * kForget + static_cast<double>(tokens);
  draft_ms_ = draft_ms_ * kForget + std::max(0.0, ms);
}

double SpecCostModel::per_token_ms() const { return fit_.slope(); }

double SpecCostModel::fixed_ms() const { return fit_.intercept(); }

double SpecCostModel::draft_ms_per_token() const { return draft_tokens_ > 0.0 ? draft_ms_ / draft_tokens_ : 0.0; }

int SpecCostModel::choose_k(double alpha, int64_t decoding, int max_k) const {
  if (!measured() || max_k <= 0) return std::max(max_k, 0);
  const double a = fixed_ms(), b = per_token_ms(), c = draft_ms_per_token();
  const double plain_per_token = a / static_cast<double>(std::max<int64_t>(decoding, 1)) + b;
  const double cost = b + c;
  double gain = plain_per_token;
  int k = 0;
  while (k < max_k) {
    gain *= alpha;  // alpha^(k+1) * plain_per_token
    if (gain <= cost) break;
    ++k;
  }
  return k;
}

double switch_off_batch(double fixed_ms, double per_token_ms, double draft_ms_per_token, double alpha) {
  const double denominator = per_token_ms * (1.0 - alpha) + draft_ms_per_token;
  return denominator > 0.0 ? alpha * fixed_ms / denominator : INFINITY;
}

double SpecCostModel::switch_off_batch(double alpha) const {
  return spec::switch_off_batch(fixed_ms(), per_token_ms(), draft_ms_per_token(), alpha);
}

}  // namespace tokenmill::spec
