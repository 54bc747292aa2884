// The Prometheus text exposition format as the benchmark reads a server's
// /metrics: "name{label="value",...} value [timestamp]" lines. Two views:
// every sample with its labels (for label-split families such as the
// engine's step phases), and one number per name with label sets summed
// (for single-series gauges and counters looked up by name).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace tokenmill::bench {

struct PrometheusSample {
  std::string name;
  std::map<std::string, std::string> labels;  // values unescaped (\\, \", \n)
  double value = 0;
};

// Every sample in text order. Comments, malformed lines and non-finite
// values are skipped; a malformed label block keeps the labels read before
// the fault. Never throws.
std::vector<PrometheusSample> parse_prometheus_samples(const std::string& text);

// One value per name: the samples of a name with different labels are
// summed. Same skipping rules as parse_prometheus_samples. Never throws.
std::map<std::string, double> parse_prometheus_text(const std::string& text);

// The first of `names` present in `metrics`.
std::optional<double> first_metric(const std::map<std::string, double>& metrics, const std::vector<std::string>& names);

// Sum of the samples named `name` whose labels include every pair of
// `match`; nullopt when no sample of that name exists at all (a family the
// server does not export), 0 when the family exists but no series matches.
std::optional<double> sum_samples(const std::vector<PrometheusSample>& samples, const std::string& name,
                                  const std::map<std::string, std::string>& match = {});

}  // namespace tokenmill::bench
