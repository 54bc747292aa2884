// libFuzzer target for the traffic-spec parser (YAML from users). Any input
// must either parse or throw tokenmill::Error; a parsed spec must satisfy
// the invariants the planner relies on, and hash its shape without failing.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "bench/traffic_spec.h"
#include "util/error.h"

namespace {

void require(bool ok) {
  if (!ok) std::abort();  // a spec that passed validation but breaks an invariant
}

void check_invariants(const tokenmill::bench::TrafficSpec& s) {
  require(!s.concurrency.empty());
  for (int64_t c : s.concurrency) require(c >= 1);
  require(!s.input_buckets.empty() && s.input_weights.size() == s.input_buckets.size());
  require(!s.output_buckets.empty() && s.output_weights.size() == s.output_buckets.size());
  for (const auto& b : s.input_buckets) require(b.min >= 0 && b.min <= b.max && b.max >= 1);
  for (const auto& b : s.output_buckets) require(b.min >= 0 && b.min <= b.max && b.max >= 1);
  double sum = 0;
  for (double w : s.input_weights) sum += w;
  require(sum > 0);
  require(!s.cache_hit_rates.empty());
  for (double h : s.cache_hit_rates) require(h >= 0 && h <= 1);
  require(s.rate > 0 && s.burst.period_s > 0 && s.burst.length_s <= s.burst.period_s);
  require(s.requests_per_cell >= 1 && s.cancel_rate >= 0 && s.cancel_rate <= 1);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const tokenmill::bench::TrafficSpec spec = tokenmill::bench::parse_traffic_spec(text, "fuzz.yaml");
    check_invariants(spec);
    if (spec.prompts_path.empty()) (void)tokenmill::bench::traffic_shape_hash(spec);
  } catch (const tokenmill::Error&) {
  }
  return 0;
}
