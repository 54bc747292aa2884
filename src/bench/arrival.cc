#include "bench/arrival.h"

#include <cmath>

namespace tokenmill::bench {
namespace {

bool has_burst(const ArrivalParams& p) {
  return p.kind == ArrivalKind::kPoissonWithBurst && p.burst.length_s > 0 && p.burst.factor != 1.0;
}

// The next time > t at which the rate may change.
double next_boundary(const ArrivalParams& p, double t) {
  const double period = p.burst.period_s;
  const double start = std::floor(t / period) * period;
  const double burst_end = start + p.burst.length_s;
  return t < burst_end ? burst_end : start + period;
}

// Advances from t by unit-rate exponential work `e` through the piecewise
// constant intensity.
double next_arrival(const ArrivalParams& p, double t, double e) {
  if (!has_burst(p)) return t + e / p.rate;
  while (true) {
    const double r = arrival_rate_at(p, t);
    const double end = next_boundary(p, t);
    const double capacity = r * (end - t);
    if (e < capacity) return t + e / r;
    e -= capacity;
    t = end;
  }
}

}  // namespace

double arrival_rate_at(const ArrivalParams& p, double t) {
  if (!has_burst(p)) return p.rate;
  const double phase = t - std::floor(t / p.burst.period_s) * p.burst.period_s;
  return phase < p.burst.length_s ? p.rate * p.burst.factor : p.rate;
}

std::vector<double> arrival_times(const ArrivalParams& p, int64_t max_requests, double duration_s, Rng& rng) {
  std::vector<double> times;
  if (p.kind == ArrivalKind::kClosedLoop || p.kind == ArrivalKind::kReplay) return times;
  double t = 0;
  for (int64_t i = 0; i < max_requests; ++i) {
    if (p.kind == ArrivalKind::kConstant) {
      t = static_cast<double>(i) / p.rate;
    } else {
      t = next_arrival(p, t, rng.exponential(1.0));
    }
    if (duration_s > 0 && t >= duration_s) break;
    times.push_back(t);
  }
  return times;
}

}  // namespace tokenmill::bench
