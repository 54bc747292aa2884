// `bench compare`: two reports of the same traffic shape -> an optimization
// ticket (change, slice, before/after card, gates, per-slice deltas, and a
// decision with its reason and next step).
//
// The decision rule, in order (docs/benchmarks.md repeats it):
//  0. Different traffic shapes (spec_hash) are refused: no ticket.
//  1. reject  — a gate failed: quality dropped more than quality_regression
//               (relative), a p99 budget was breached (overall or any slice
//               with >= min_slice_requests ok requests on both sides), or the
//               communication share exceeded its cap.
//  2. hold    — a gate that is on could not be evaluated (e.g. quality_regression
//               is set but no quality files were given);
//  3. hold    — a trade-off: some headline metric regressed (TTFT p50, E2E p99,
//               cost per success or output tok/s worse by more than
//               max_regression, or the success rate down by more than
//               max_success_rate_drop, absolute);
//  4. hold    — nothing improved by at least min_improvement;
//  5. ship    — otherwise: gates pass, something improved, nothing regressed.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/traffic_spec.h"

namespace tokenmill::bench {

// A quality result: {"score": x} or {"accuracy": x} (higher is better) or
// {"perplexity": x} (lower is better), as JSON.
struct Quality {
  std::string metric;
  double value = 0;
  bool higher_is_better = true;
};
Quality parse_quality(const nlohmann::json& j, const std::string& origin);
Quality load_quality(const std::string& path);

struct CompareInput {
  nlohmann::json before;  // bench serve reports
  nlohmann::json after;
  Gates gates;
  std::optional<Quality> quality_before;
  std::optional<Quality> quality_after;
  std::string change;
  std::string slice;
  std::string cell;  // headline cell key; "" = overall
};

struct GateResult {
  std::string name;
  std::string status;  // pass, fail, not_measured
  std::string detail;
};

struct Ticket {
  std::string change, slice, cell, spec_hash;
  nlohmann::json before, after;  // cards: ttft_ms, tpot_ms, p99_ms, success_rate, cost_cents, output_tok_per_s
  std::vector<GateResult> gates;
  nlohmann::json slices;  // key -> metric -> {before, after, change}
  std::vector<std::string> improved, regressed;
  std::string decision, reason, next;
};

// Throws Error when the shapes differ or a report is not a bench report.
Ticket decide(const CompareInput& in);

// The ticket as YAML, `optimization_ticket:` at the top.
std::string ticket_yaml(const Ticket& t);

// Gates as read from a report's "gates" object (the spec's gates).
Gates gates_from_report(const nlohmann::json& report);

// Throws Error unless `report` is a `bench serve` report; `side` names it
// in the message ("before", "after").
void check_bench_report(const nlohmann::json& report, const char* side);

// The cell `key` of a report ("" or "overall": the whole run); throws
// Error naming `side` when the report has no such cell.
const nlohmann::json& report_cell(const nlohmann::json& report, const std::string& key, const char* side);

// Throws Error naming the differing traffic_shape keys unless both reports
// ran the same traffic shape (spec_hash): only such runs may be compared.
void check_same_traffic(const nlohmann::json& before, const nlohmann::json& after);

}  // namespace tokenmill::bench
