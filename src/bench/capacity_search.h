// The search behind `bench serve --find-capacity`, apart from any HTTP: given
// a function that runs one step at a load (an arrival rate, or a number of
// concurrent clients) and says whether it met the spec, find the highest
// load that meets. It assumes "meets" is monotone in the load (more load
// never helps) and spends its steps accordingly:
//   1. bracket: from the start load, double while steps meet, or halve while
//      they fail, until one load meets and a higher one fails;
//   2. bisect: test the midpoint of [highest meeting, lowest failing] until
//      the gap is within `precision` of the highest meeting load (integer
//      loads: also stop once the gap is 1).
// A noisy step above a failing one cannot move the answer up: only loads
// inside the bracket are tried.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace tokenmill::bench {

struct CapacitySearchOptions {
  double start = 1;        // first load tried (rounded up to an integer load, clamped to [min_load, max_load])
  bool integer = false;    // concurrency: whole numbers only
  double precision = 0.1;  // stop when (failing - meeting) / meeting <= precision
  int64_t max_steps = 12;  // steps in all, bracketing included
  double min_load = 1e-3;  // halving stops here (a load that fails even here has no capacity)
  double max_load = 1e6;   // doubling stops here
};

struct CapacitySearchResult {
  std::optional<double> highest_meeting;  // the capacity; empty when no step met
  std::optional<double> lowest_failing;   // empty when every step met
  std::vector<double> loads;              // in the order they were run
  std::vector<bool> met;                  // parallel to loads
  bool converged = false;                 // bracketed and narrowed to the precision
  std::string stop_reason;                // why the search ended, for people
};

// Runs steps through `meets` (called once per step, in order) and returns
// the bracket it found. Throws Error for options out of range.
CapacitySearchResult search_capacity(const CapacitySearchOptions& options, const std::function<bool(double)>& meets);

}  // namespace tokenmill::bench
