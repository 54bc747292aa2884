// A straight line y = a + b x fitted online by least squares, old points
// forgotten exponentially, with a prior that holds the slope while the
// observations leave it free (all at one x).
//
// Used for per-step costs: speculative decoding's draft length
// (spec/cost_model.h) and the SLO admission's step-cost model
// (sched/step_cost_model.h). Thread-safety: none.
#pragma once

namespace tokenmill {

class ForgettingLineFit {
 public:
  // forget: each point's weight is multiplied by this at every new point.
  // The prior is prior_weight pseudo-points on the line b = prior_slope a
  // through the observed mean.
  ForgettingLineFit(double forget, double prior_slope, double prior_weight)
      : forget_(forget), prior_slope_(prior_slope), prior_weight_(prior_weight) {}

  void observe(double x, double y);
  // b >= 0; 0 before any point.
  double slope() const;
  // a >= 0 (the mean of y less slope * mean of x); 0 before any point.
  double intercept() const;
  // The fit at x (0 before any point).
  double at(double x) const { return intercept() + slope() * x; }
  // The forgotten count of points seen (0: nothing measured).
  double weight() const { return weight_; }

 private:
  double forget_, prior_slope_, prior_weight_;
  double weight_ = 0.0, sx_ = 0.0, sy_ = 0.0, sxx_ = 0.0, sxy_ = 0.0;
};

}  // namespace tokenmill
