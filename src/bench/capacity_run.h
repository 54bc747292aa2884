// `tokenmill bench serve SPEC --find-capacity`: the highest load of the
// spec's traffic that a server carries within the spec's SLOs. One load
// variable is swept — traffic.rate for open-loop arrivals (poisson,
// poisson_with_burst, constant), the number of clients for closed loop —
// each step a short `bench serve` run of the same shape (buckets, cache-hit
// rate) in one cell with fresh prompts (the spec's seed + the step index), judged by capacity_step.h and steered by
// capacity_search.h. Writes capacity.json, capacity.md, plots/ and one
// folder per step (steps/NN_*/report.json ...) under the output directory,
// and prints the answer on stdout.
#pragma once

#include <cstdint>

#include "bench/serve_run.h"

namespace tokenmill::bench {

struct CapacityOptions {
  double percentile = 99;    // SLOs must hold at this percentile
  double min_goodput = 0.9;  // share of (sent - cancelled) requests ok and within every SLO
  int64_t requests = 0;      // per step; 0: the spec's traffic.requests_per_cell
  double precision = 0.1;    // relative width of the final bracket
  int64_t max_steps = 12;
  double start = 0;     // first load; 0: traffic.rate, or the first traffic.concurrency in closed loop
  int64_t clients = 0;  // open loop: client connections; 0: the largest traffic.concurrency
};

// Throws Error for a spec without SLOs, replayed traces, bad options, an
// unreachable server or unwritable output.
void run_capacity_search(const ServeOptions& serve, const CapacityOptions& capacity);

}  // namespace tokenmill::bench
