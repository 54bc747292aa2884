// Arrival processes: when each request of a cell is scheduled, in seconds
// from the cell's start. Closed loop has no schedule (a client sends its next
// request when the previous one ends), so it yields none.
#pragma once

#include <cstdint>
#include <vector>

#include "bench/rng.h"
#include "bench/traffic_spec.h"

namespace tokenmill::bench {

struct ArrivalParams {
  ArrivalKind kind = ArrivalKind::kPoisson;
  double rate = 1.0;  // requests per second outside bursts
  BurstParams burst;
};

// The instantaneous rate at time t (burst windows start at t = 0, period_s,
// 2 * period_s, ...).
double arrival_rate_at(const ArrivalParams& p, double t);

// Scheduled offsets, ascending: at most `max_requests`, and none at or after
// `duration_s` when duration_s > 0. Empty for closed loop and replay.
// poisson_with_burst is a non-homogeneous Poisson process with a piecewise
// constant rate, drawn exactly by inverting its cumulative intensity.
std::vector<double> arrival_times(const ArrivalParams& p, int64_t max_requests, double duration_s, Rng& rng);

}  // namespace tokenmill::bench
