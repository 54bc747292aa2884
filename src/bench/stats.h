// Summary statistics for latency samples. Percentiles interpolate linearly
// between order statistics (numpy's default, Hyndman-Fan type 7): with the
// n samples sorted, p_q = x[floor(h)] + (h - floor(h)) * (x[floor(h)+1] -
// x[floor(h)]), h = (n - 1) * q.
#pragma once

#include <cstdint>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace tokenmill::bench {

// Precondition: `sorted` ascending and non-empty; 0 <= q <= 1.
double percentile_sorted(const std::vector<double>& sorted, double q);

// The q-quantile of unsorted samples as above; 0 for no samples.
double percentile(std::vector<double> samples, double q);

struct Summary {
  int64_t count = 0;
  double mean = 0, p50 = 0, p90 = 0, p95 = 0, p99 = 0, min = 0, max = 0;
};

// NaN samples are dropped; an empty input gives count 0 and zeros.
Summary summarize(std::vector<double> samples);

// a / b, or 0 where b is not positive (a rate over an empty interval).
double ratio_or_zero(double a, double b);

// {"count", "mean", "p50", "p90", "p95", "p99", "min", "max"}; null values when empty.
nlohmann::json summary_to_json(const Summary& s);

}  // namespace tokenmill::bench
