// One step of a capacity search, measured and judged: the numbers of one
// short run at one offered load, and whether it meets the spec's SLOs.
//
// Latencies here count from the request's arrival: its scheduled send time
// in open loop (so time spent waiting for a free client connection counts,
// as a user would feel it), its send time in closed loop. Intentionally
// cancelled requests (traffic.cancel_rate) leave the goodput denominator;
// errors, timeouts, rejections and OOMs stay in it and count as misses.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "bench/driver.h"
#include "bench/traffic_spec.h"

namespace tokenmill::bench {

// How a step is judged.
struct StepCriteria {
  Slo slo;                   // limits of 0 are not judged
  double percentile = 99;    // each SLO must hold at this percentile of the ok requests
  double min_goodput = 0.9;  // and (ok within every SLO) / (sent - cancelled) must reach this
};

struct LatencyPercentiles {
  int64_t count = 0;
  double p50 = 0, p99 = 0, at_percentile = 0;  // NaN when count is 0
};

struct StepMeasure {
  int64_t sent = 0, ok = 0, good = 0, cancelled = 0;
  int64_t errors = 0, timeouts = 0, rejected = 0, oom = 0;
  double window_s = 0;  // first send to last end
  // The arrivals this step really had: (sent - 1) gaps over the span from
  // the first scheduled arrival to the last. A finite sample of a bursty
  // process, so it may differ from the offered mean; ok req/s is bounded by
  // it, not by the offered rate. 0 with fewer than two.
  double arrived_req_per_s = 0;
  double achieved_req_per_s = 0;  // ok / window
  double output_tok_per_s = 0;
  double goodput_share = 0;      // good / (sent - cancelled)
  double goodput_req_per_s = 0;  // good / window
  LatencyPercentiles ttft, tpot, e2e;
};

StepMeasure measure_step(const CellRun& cell, const StepCriteria& criteria);

// Whether the step meets; `reasons` gets one line per missed criterion
// (e.g. "TTFT p99 812 ms > 500 ms").
bool step_meets(const StepMeasure& m, const StepCriteria& criteria, std::vector<std::string>& reasons);

nlohmann::json step_measure_json(const StepMeasure& m);

}  // namespace tokenmill::bench
