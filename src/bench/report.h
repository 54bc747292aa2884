// The report of one `bench serve` run: every cell (concurrency x
// cache_hit_rate x input length bucket, plus each concurrency x
// cache_hit_rate over all buckets) and the whole run, as JSON; the Markdown
// view is rendered from that JSON alone (report_markdown.cc), so a report
// can be re-rendered without re-running.
//
// Conventions (docs/benchmarks.md states them for readers):
//  - TTFT counts ok and cancelled requests that saw a first token; TPOT,
//    E2E and queue count ok requests; ITL pools every gap between text
//    chunks of ok and cancelled requests.
//  - Throughput divides by the cell's window (first send to last end); a
//    bucket's throughput uses its cell's window, so buckets add up.
//  - Cost = window seconds * usd_per_hour / 3600, split between buckets by
//    their share of tokens (input + output).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/driver.h"
#include "bench/plan.h"
#include "bench/server_monitor.h"
#include "bench/traffic_spec.h"

namespace tokenmill::bench {

struct RunResult {
  std::string url;
  std::string started_at;  // ISO 8601, UTC
  CellRun warmup;
  std::vector<CellRun> cells;           // parallel to RunPlan::cells
  std::vector<ServerCellStats> server;  // parallel to cells
  std::optional<double> server_peak_rss_bytes;
};

// Mean ms per ok request spent per stage, and the dominant stage.
struct StageSplit {
  double client_queue_ms = 0, server_queue_ms = 0, prefill_ms = 0, decode_ms = 0;
  std::string bottleneck;
};
StageSplit stage_split(const std::vector<const RequestRecord*>& ok);

nlohmann::json build_report(const TrafficSpec& spec, const RunPlan& plan, const RunResult& run);

// The driver's own overhead and the warnings it raises (client-bound runs).
nlohmann::json driver_report(const RunResult& run);

// Markdown for people: headline, where the time goes, per-cell tables, plots.
std::string report_markdown(const nlohmann::json& report);

// Writes gnuplot data and scripts under `dir` and renders SVGs when gnuplot
// is installed. Returns the written image paths relative to `dir`'s parent;
// sets `warning` when plots could not be rendered.
std::vector<std::string> write_plots(const RunPlan& plan, const RunResult& run, const nlohmann::json& report,
                                     const std::string& dir, std::string& warning);

}  // namespace tokenmill::bench
