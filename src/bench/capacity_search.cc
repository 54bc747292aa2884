#include "bench/capacity_search.h"

#include <algorithm>
#include <cmath>

#include "util/error.h"

namespace tokenmill::bench {
namespace {

bool narrow_enough(const CapacitySearchOptions& o, double lo, double hi) {
  if (o.integer && hi - lo <= 1) return true;
  return (hi - lo) <= o.precision * lo;
}

}  // namespace

CapacitySearchResult search_capacity(const CapacitySearchOptions& o, const std::function<bool(double)>& meets) {
  if (!(o.precision > 0)) fail("capacity search: precision must be > 0 (got {})", o.precision);
  if (o.max_steps < 1) fail("capacity search: max steps must be >= 1 (got {})", o.max_steps);
  if (!(o.min_load > 0) || !(o.max_load >= o.min_load)) {
    fail("capacity search: need 0 < min load <= max load (got {}, {})", o.min_load, o.max_load);
  }
  if (!(o.start > 0)) fail("capacity search: the start load must be > 0 (got {})", o.start);
  CapacitySearchResult r;
  std::optional<double>& lo = r.highest_meeting;
  std::optional<double>& hi = r.lowest_failing;
  auto step = [&](double load) {
    const bool ok = meets(load);
    r.loads.push_back(load);
    r.met.push_back(ok);
    if (ok) {
      lo = lo ? std::max(*lo, load) : load;
    } else {
      hi = hi ? std::min(*hi, load) : load;
    }
  };
  auto steps_left = [&] { return static_cast<int64_t>(r.loads.size()) < o.max_steps; };
  double load = std::clamp(o.integer ? std::ceil(o.start) : o.start, o.min_load, o.max_load);

  // Bracket.
  while (!(lo && hi)) {
    if (!steps_left()) {
      r.stop_reason = "step limit reached before the knee was bracketed";
      return r;
    }
    step(load);
    if (r.met.back()) {
      if (load >= o.max_load) {
        r.stop_reason = "the highest load allowed still meets";
        return r;
      }
      load = std::min(o.max_load, o.integer ? std::max(load * 2, load + 1) : load * 2);
    } else {
      if (load <= o.min_load) {
        r.stop_reason = "even the lowest load allowed fails";
        return r;
      }
      load = std::max(o.min_load, o.integer ? std::floor(load / 2) : load / 2);
    }
  }

  // Bisect.
  while (!narrow_enough(o, *lo, *hi)) {
    if (!steps_left()) {
      r.stop_reason = "step limit reached before the precision";
      return r;
    }
    step(o.integer ? std::floor((*lo + *hi) / 2) : (*lo + *hi) / 2);
  }
  r.converged = true;
  r.stop_reason = "converged";
  return r;
}

}  // namespace tokenmill::bench
