// Adaptive draft length: how many draft tokens a sequence should verify
// this step, from what the engine has measured.
//
// A decode step of T tokens (decodes + drafts) costs about a + b T
// milliseconds: a is the part every step pays once (reading the weights, on
// a memory-bound CPU most of it), b each token's own compute. Fitted online
// by least squares over recent decode-only steps (prefill chunks run in
// another regime and are left out), exponentially forgetting old steps.
//
// With N sequences decoding, plain decoding pays (a + b N) / N per token. A
// draft token costs b to verify plus c to draft (c measured per draft
// token; 0 for prompt lookup), and the j-th draft token of a sequence is
// kept only when the j - 1 before it were, with probability alpha^j when
// each is accepted with probability alpha. So the j-th token pays while
//
//     alpha^j * (a / N + b) > b + c,
//
// and k is the largest such j (at most the configured k). As N grows a / N
// vanishes: once alpha (a / N + b) <= b + c no draft pays and speculation
// switches itself off; the batch size where that happens is
// N* = alpha a / (b (1 - alpha) + c) (switch_off_batch).
//
// alpha is per sequence (AcceptanceEstimate). Thread-safety: none (engine
// thread).
#pragma once

#include <cstdint>

#include "util/line_fit.h"

namespace tokenmill::spec {

// A running per-token acceptance probability: drafts are Bernoulli trials
// (each accepted token a success, the first rejected one a failure),
// counted with exponential forgetting on top of a prior worth kPriorTrials
// trials. The engine keeps one over all sequences (forgetting slowly),
// which is each sequence's prior: a new sequence starts from what the
// workload has shown, then follows its own evidence. idle() relaxes a
// sequence that drafts nothing back towards that prior.
class AcceptanceEstimate {
 public:
  explicit AcceptanceEstimate(double forget = kForget) : forget_(forget) {}
  // accepted of drafted tokens were kept by the last verification.
  void observe(int64_t drafted, int64_t accepted);
  // A step in which the sequence drafted nothing.
  void idle();
  double alpha(double prior = kPrior) const;

  static constexpr double kPrior = 0.6;        // before any evidence at all
  static constexpr double kPriorTrials = 2.0;  // the prior's weight in trials
  static constexpr double kForget = 0.9;       // per verification (a sequence)
  static constexpr double kIdleForget = 0.9;   // per idle step

 private:
  double forget_;
  double successes_ = 0.0;
  double trials_ = 0.0;
};

// A sequence whose k is 0 still drafts one token after this many idle
// decoding steps: without it an estimate or a fit that turned speculation
// off could never see the evidence to turn it back on.
inline constexpr int kProbeInterval = 16;

// N* for a fit (a, b ms per step; c ms per draft token) at acceptance
// alpha: alpha a / (b (1 - alpha) + c); infinity when nothing costs.
double switch_off_batch(double fixed_ms, double per_token_ms, double draft_ms_per_token, double alpha);

class SpecCostModel {
 public:
  // A decode-only step: `tokens` computed (decodes + drafts) in `ms` of
  // forward pass.
  void observe_step(int64_t tokens, double ms);
  // Drafting this step: `tokens` draft tokens produced in `ms`.
  void observe_draft(int64_t tokens, double ms);

  // Draft length in [0, max_k] for a sequence with acceptance `alpha` when
  // `decoding` sequences decode. max_k before any decode step is measured.
  int choose_k(double alpha, int64_t decoding, int max_k) const;

  // The fit (ms): a, b, and c (draft cost per draft token).
  double fixed_ms() const;
  double per_token_ms() const;
  double draft_ms_per_token() const;
  // N*: the batch size from which no draft pays at acceptance alpha.
  double switch_off_batch(double alpha) const;
  bool measured() const { return fit_.weight() > 0.0; }

  static constexpr double kForget = 0.98;  // per observed step
  // Before the fit is determined (all steps the same size) a prior slope
  // holds it: b = kPriorSlope * a, weighted as kPriorWeight steps.
  static constexpr double kPriorSlope = 0.1;
  static constexpr double kPriorWeight = 0.5;

 private:
  ForgettingLineFit fit_{kForget, kPriorSlope, kPriorWeight};  // y = a + b x
  double draft_tokens_ = 0.0, draft_ms_ = 0.0;
};

}  // namespace tokenmill::spec
