#include "spec/rejection_rule.h"

#include <algorithm>

#include "util/check.h"

namespace tokenmill::spec {

DraftVerdict judge_draft(std::span<const float> p, std::span<const float> q, int32_t draft, double u,
                         std::vector<float>& residual) {
  TM_CHECK(p.size() == q.size());
  TM_CHECK(draft >= 0 && static_cast<size_t>(draft) < p.size());
  const double pd = p[static_cast<size_t>(draft)];
  const double qd = q[static_cast<size_t>(draft)];
  TM_CHECK_MSG(qd > 0.0, "the draft token has no probability under its own proposer");
  // u < p/q, without the division; p >= q always accepts.
  if (pd >= qd || u * qd < pd) return DraftVerdict{true, nullptr};
  residual.resize(p.size());
  double total = 0.0;
  for (size_t i = 0; i < p.size(); ++i) {
    residual[i] = std::max(0.0f, p[i] - q[i]);
    total += residual[i];
  }
  // p(draft) < q(draft) leaves mass elsewhere in exact arithmetic; only
  // rounding (p and q equal but for ulps) can empty it, and p is then the
  // right law to draw from.
  if (total <= 0.0) residual.assign(p.begin(), p.end());
  return DraftVerdict{false, &residual};
}

}  // namespace tokenmill::spec
