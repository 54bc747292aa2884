#include "sched/step_cost_model.h"

#include <algorithm>

namespace tokenmill::sched {

void StepCostModel::observe(int64_t decode_rows, int64_t prefill_tokens, double ms) {
  if (!(ms > 0.0) || decode_rows < 0 || prefill_tokens < 0 || decode_rows + prefill_tokens == 0) return;
  if (prefill_tokens == 0) {
    decode_.observe(static_cast<double>(decode_rows), ms);
    return;
  }
  const double beyond = decode_.weight() > 0.0 ? ms - decode_.at(static_cast<double>(decode_rows)) : ms;
  prefill_steps_ = prefill_steps_ * kForget + 1.0;
  prefill_tokens_ = prefill_tokens_ * kForget + static_cast<double>(prefill_tokens);
  prefill_ms_ = prefill_ms_ * kForget + std::max(0.0, beyond);
}

double StepCostModel::per_prefill_token_ms() const {
  return prefill_tokens_ > 0.0 ? prefill_ms_ / prefill_tokens_ : 0.0;
}

double StepCostModel::step_ms(int64_t decode_rows, int64_t prefill_tokens) const {
  return decode_.at(static_cast<double>(decode_rows)) + per_prefill_token_ms() * static_cast<double>(prefill_tokens);
}

bool StepCostModel::measured() const { return decode_.weight() >= kMinSteps && prefill_steps_ >= kMinSteps; }

}  // namespace tokenmill::sched
