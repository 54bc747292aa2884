#include "util/line_fit.h"

#include <algorithm>

namespace tokenmill {

void ForgettingLineFit::observe(double x, double y) {
  weight_ = weight_ * forget_ + 1.0;
  sx_ = sx_ * forget_ + x;
  sy_ = sy_ * forget_ + y;
  sxx_ = sxx_ * forget_ + x * x;
  sxy_ = sxy_ * forget_ + x * y;
}

// Least squares with the prior as prior_weight pseudo-points on the line
// b = prior_slope a through the observed mean: y = a (1 + prior_slope x).
// The prior points sit at x = 1 and x = 1 + mean x, so they pin the slope
// only where the observations leave it free.
double ForgettingLineFit::slope() const {
  if (weight_ <= 0.0) return 0.0;
  const double mx = sx_ / weight_, my = sy_ / weight_;
  const double a0 = my / (1.0 + prior_slope_ * mx);
  double w = weight_, sx = sx_, sy = sy_, sxx = sxx_, sxy = sxy_;
  for (double x : {1.0, 1.0 + mx}) {
    const double y = a0 * (1.0 + prior_slope_ * x);
    w += prior_weight_;
    sx += prior_weight_ * x;
    sy += prior_weight_ * y;
    sxx += prior_weight_ * x * x;
    sxy += prior_weight_ * x * y;
  }
  const double det = w * sxx - sx * sx;
  const double b = det > 0.0 ? (w * sxy - sx * sy) / det : prior_slope_ * a0;
  return std::max(0.0, b);
}

double ForgettingLineFit::intercept() const {
  if (weight_ <= 0.0) return 0.0;
  return std::max(0.0, sy_ / weight_ - slope() * sx_ / weight_);
}

}  // namespace tokenmill
