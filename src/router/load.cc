#include "router/load.h"

namespace tokenmill::router {

double mean_request_tokens(std::span<const LoadInputs> replicas) {
  double tokens = 0;
  int64_t requests = 0;
  for (const LoadInputs& r : replicas) {
    tokens += r.tokens;
    requests += r.in_flight;
  }
  return requests > 0 && tokens > 0 ? tokens / static_cast<double>(requests) : 1.0;
}

double replica_load(const LoadInputs& r, double mean_tokens) {
  return static_cast<double>(r.waiting) + 0.5 * static_cast<double>(r.in_flight) + 0.5 * r.tokens / mean_tokens;
}

double load_bound(std::span<const double> loads, std::span<const char> usable, double slack) {
  double sum = 0;
  int n = 0;
  for (size_t i = 0; i < loads.size(); ++i) {
    if (!usable[i]) continue;
    sum += loads[i];
    ++n;
  }
  const double mean = n > 0 ? sum / n : 0.0;
  return (1.0 + slack) * mean + 1.0;
}

Pick pick_affinity(const HashRing& ring, uint64_t key, std::span<const double> loads, std::span<const char> usable,
                   double slack) {
  const double bound = load_bound(loads, usable, slack);
  Pick pick;
  bool first = true;
  for (const int m : ring.walk(key)) {
    const size_t i = static_cast<size_t>(m);
    if (!usable[i]) continue;
    if (loads[i] <= bound) {
      pick.replica = m;
      pick.preferred = first;
      return pick;
    }
    first = false;
  }
  return pick;
}

int pick_least_load(std::span<const double> loads, std::span<const char> usable, uint64_t start) {
  const size_t n = loads.size();
  int best = -1;
  for (size_t k = 0; k < n; ++k) {
    const size_t i = (start + k) % n;
    if (usable[i] && (best < 0 || loads[i] < loads[static_cast<size_t>(best)])) best = static_cast<int>(i);
  }
  return best;
}

int pick_round_robin(std::span<const char> usable, uint64_t counter) {
  size_t num_usable = 0;
  for (const char u : usable) num_usable += u ? 1 : 0;
  if (num_usable == 0) return -1;
  size_t skip = counter % num_usable;
  for (size_t i = 0; i < usable.size(); ++i) {
    if (!usable[i]) continue;
    if (skip-- == 0) return static_cast<int>(i);
  }
  return -1;
}

}  // namespace tokenmill::router
