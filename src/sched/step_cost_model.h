// What one engine step costs, learned from the steps the engine runs: the
// basis of SLO-aware admission (slo_forecast.h).
//
// A step with D decoding rows and P prefill tokens takes about
//
//     a + b D + c P   milliseconds.
//
// a + b D is fitted over the decode-only steps (ForgettingLineFit: on a
// memory-bound CPU a, reading the weights, dominates). c is the cost of a
// prefill token: over the steps with prefill, what the step took beyond
// its decode line, per prefill token (a ratio of forgotten sums, so one
// noisy step moves it little). Before any decode-only step the decode line
// is unknown and a prefill step's whole time is charged to its tokens.
//
// Whole steps are measured (scheduling, sampling and emitting included):
// that is what a request's latency is made of. Thread-safety: none.
#pragma once

#include <cstdint>

#include "util/line_fit.h"

namespace tokenmill::sched {

class StepCostModel {
 public:
  // A step that ran `decode_rows` decodes (draft tokens included) and
  // `prefill_tokens` prompt tokens in `ms` milliseconds.
  void observe(int64_t decode_rows, int64_t prefill_tokens, double ms);

  // The predicted milliseconds of such a step.
  double step_ms(int64_t decode_rows, int64_t prefill_tokens) const;

  // Both kinds of step seen (kMinSteps each): predictions can be trusted.
  bool measured() const;
  double fixed_ms() const { return decode_.intercept(); }
  double per_decode_ms() const { return decode_.slope(); }
  double per_prefill_token_ms() const;

  static constexpr double kForget = 0.98;  // per observed step of its kind
  static constexpr double kMinSteps = 2.0;
  static constexpr double kPriorSlope = 0.02;  // b = 0.02 a until batch sizes vary
  static constexpr double kPriorWeight = 0.5;

 private:
  ForgettingLineFit decode_{kForget, kPriorSlope, kPriorWeight};
  double prefill_steps_ = 0.0;   // forgotten count of steps with prefill
  double prefill_tokens_ = 0.0;  // forgotten sums over them
  double prefill_ms_ = 0.0;      // of the time beyond the decode line
};

}  // namespace tokenmill::sched
