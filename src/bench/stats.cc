#include "bench/stats.h"

#include <algorithm>
#include <cmath>

#include <nlohmann/json.hpp>

#include "util/check.h"

namespace tokenmill::bench {

double percentile_sorted(const std::vector<double>& sorted, double q) {
  TM_CHECK(!sorted.empty() && q >= 0 && q <= 1);
  const double h = static_cast<double>(sorted.size() - 1) * q;
  const size_t lo = static_cast<size_t>(std::floor(h));
  if (lo + 1 >= sorted.size()) return sorted.back();
  return sorted[lo] + (h - static_cast<double>(lo)) * (sorted[lo + 1] - sorted[lo]);
}

Summary summarize(std::vector<double> samples) {
  samples.erase(std::remove_if(samples.begin(), samples.end(), [](double x) { return std::isnan(x); }), samples.end());
  Summary s;
  if (samples.empty()) return s;
  std::sort(samples.begin(), samples.end());
  s.count = static_cast<int64_t>(samples.size());
  double sum = 0;
  for (double x : samples) sum += x;
  s.mean = sum / static_cast<double>(samples.size());
  s.p50 = percentile_sorted(samples, 0.50);
  s.p90 = percentile_sorted(samples, 0.90);
  s.p95 = percentile_sorted(samples, 0.95);
  s.p99 = percentile_sorted(samples, 0.99);
  s.min = samples.front();
  s.max = samples.back();
  return s;
}

nlohmann::json summary_to_json(const Summary& s) {
  if (s.count == 0) {
    return {{"count", 0},     {"mean", nullptr}, {"p50", nullptr}, {"p90", nullptr},
            {"p95", nullptr}, {"p99", nullptr},  {"min", nullptr}, {"max", nullptr}};
  }
  return {{"count", s.count}, {"mean", s.mean}, {"p50", s.p50}, {"p90", s.p90},
          {"p95", s.p95},     {"p99", s.p99},   {"min", s.min}, {"max", s.max}};
}

double percentile(std::vector<double> samples, double q) {
  if (samples.empty()) return 0.0;
  std::sort(samples.begin(), samples.end());
  return percentile_sorted(samples, q);
}

double ratio_or_zero(double a, double b) { return b > 0 ? a / b : 0.0; }

}  // namespace tokenmill::bench
