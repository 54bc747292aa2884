#include "bench/capacity_run.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "bench/capacity_report.h"
#include "bench/capacity_search.h"
#include "bench/capacity_step.h"
#include "util/error.h"

namespace tokenmill::bench {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

void check_inputs(const TrafficSpec& spec, const ServeOptions& s, const CapacityOptions& c) {
  if (spec.slo.ttft_ms <= 0 && spec.slo.tpot_ms <= 0 && spec.slo.e2e_ms <= 0) {
    fail(
        "{}: --find-capacity needs at least one SLO in the spec (slo: {{ttft_ms, tpot_ms, e2e_ms}}): "
        "capacity is the highest load that meets them",
        s.spec_path);
  }
  if (spec.arrival == ArrivalKind::kReplay) {
    fail("{}: --find-capacity sweeps traffic.rate or the closed-loop concurrency; a replayed trace has neither",
         s.spec_path);
  }
  if (s.dry_run) fail("--find-capacity runs requests; it does not go with --dry-run");
  if (!(c.percentile > 0 && c.percentile <= 100))
    fail("--capacity-percentile must be in (0, 100] (got {})", c.percentile);
  if (!(c.min_goodput >= 0 && c.min_goodput <= 1)) fail("--min-goodput must be in [0, 1] (got {})", c.min_goodput);
  if (c.requests < 0) fail("--capacity-requests must be >= 0 (got {})", c.requests);
  if (c.clients < 0) fail("--capacity-clients must be >= 0 (got {})", c.clients);
  if (c.start < 0) fail("--capacity-start must be >= 0 (got {})", c.start);
}

// The mean arrival rate a step offers: traffic.rate, raised by the bursts.
double mean_offered_rate(const TrafficSpec& s) {
  if (s.arrival != ArrivalKind::kPoissonWithBurst) return s.rate;
  return s.rate * (1 + (s.burst.factor - 1) * s.burst.length_s / s.burst.period_s);
}

struct Sweep {
  bool closed_loop = false;
  int64_t clients = 1;   // open loop: client connections of every step
  int64_t requests = 0;  // per step (closed loop: at least two per client)
  double cache_hit_rate = 0;
  uint64_t seed = 1;  // the spec's; step i runs with seed + i
};

std::vector<std::string> step_overrides(const Sweep& w, double load, size_t index) {
  std::vector<std::string> o = {fmt::format("traffic.cache_hit_rate=[{}]", w.cache_hit_rate)};
  // Fresh prompts every step: a step that re-sent an earlier one's would be
  // served from the server's prefix cache, whatever cache_hit_rate says.
  o.push_back(fmt::format("controls.random_seed={}", w.seed + index));
  if (w.closed_loop) {
    const auto c = static_cast<int64_t>(load);
    o.push_back(fmt::format("traffic.concurrency=[{}]", c));
    o.push_back(fmt::format("traffic.requests_per_cell={}", std::max(w.requests, 2 * c)));
  } else {
    o.push_back(fmt::format("traffic.rate={}", load));
    o.push_back(fmt::format("traffic.concurrency=[{}]", w.clients));
    o.push_back(fmt::format("traffic.requests_per_cell={}", w.requests));
  }
  // The spec's warmup warms the server once, before the first step.
  if (index > 0) o.push_back("controls.warmup_requests=0");
  return o;
}

json criteria_json(const StepCriteria& c) {
  return {{"slo_ms", {{"ttft", c.slo.ttft_ms}, {"tpot", c.slo.tpot_ms}, {"e2e", c.slo.e2e_ms}}},
          {"percentile", c.percentile},
          {"min_goodput", c.min_goodput}};
}

// Runs step `index` (0-based) at `load` as a one-cell `bench serve` run into
// OUT/steps/NN_*/ and returns its capacity.json entry ("meets" included).
json run_step(const ServeOptions& serve, const Sweep& sweep, const StepCriteria& criteria, double load, size_t index) {
  const std::string dir = fmt::format("steps/{:02d}_{}_{:g}", index + 1, sweep.closed_loop ? "c" : "rate", load);
  ServeOptions o = serve;
  o.out_dir = (fs::path(serve.out_dir) / dir).string();
  o.plots = false;
  for (std::string& s : step_overrides(sweep, load, index)) o.overrides.push_back(std::move(s));
  std::fprintf(stderr, "capacity: step %zu: %s %g\n", index + 1, sweep.closed_loop ? "concurrency" : "rate (req/s)",
               load);
  const ServeOutcome outcome = run_serve_benchmark(o);
  const StepMeasure m = measure_step(outcome.run.cells.at(0), criteria);
  std::vector<std::string> reasons;
  const bool meets = step_meets(m, criteria, reasons);
  const std::string why = fmt::format("{}", fmt::join(reasons, "; "));
  std::fprintf(stderr, "capacity: step %zu: %s (goodput %.1f %%, %.2f ok req/s%s%s)\n", index + 1,
               meets ? "meets" : "fails", 100 * m.goodput_share, m.achieved_req_per_s, why.empty() ? "" : "; ",
               why.c_str());
  json j = step_measure_json(m);
  j["index"] = index + 1;
  j["offered_load"] = load;
  j["concurrency"] = outcome.spec.concurrency.front();
  j["offered_req_per_s"] = sweep.closed_loop ? json(nullptr) : json(mean_offered_rate(outcome.spec));
  j["meets"] = meets;
  j["reasons"] = reasons;
  j["report_dir"] = dir;
  return j;
}

json result_json(const TrafficSpec& spec, const ServeOptions& serve, const Sweep& sweep, const StepCriteria& criteria,
                 const CapacitySearchOptions& so, const CapacitySearchResult& r, json steps) {
  json result = {{"format", "tokenmill-capacity/1"},
                 {"benchmark", spec.name},
                 {"spec_hash", traffic_shape_hash(spec)},
                 {"url", serve.url.empty() ? spec.url : serve.url},
                 {"arrival", arrival_name(spec.arrival)},
                 {"load_variable", sweep.closed_loop ? "concurrency" : "rate"},
                 {"load_unit", sweep.closed_loop ? "concurrent clients" : "req/s"},
                 {"criteria", criteria_json(criteria)},
                 {"search",
                  {{"start", so.start},
                   {"precision", so.precision},
                   {"max_steps", so.max_steps},
                   {"requests_per_step", sweep.requests},
                   {"clients", sweep.closed_loop ? json(nullptr) : json(sweep.clients)},
                   {"cache_hit_rate", sweep.cache_hit_rate}}},
                 {"capacity", r.highest_meeting ? json(*r.highest_meeting) : json(nullptr)},
                 {"first_failing", r.lowest_failing ? json(*r.lowest_failing) : json(nullptr)},
                 {"converged", r.converged},
                 {"stop_reason", r.stop_reason},
                 {"steps", std::move(steps)}};
  if (!sweep.closed_loop && r.highest_meeting) {
    TrafficSpec at = spec;
    at.rate = *r.highest_meeting;
    result["capacity_mean_req_per_s"] = mean_offered_rate(at);
  }
  result["statement"] = capacity_statement(result);
  return result;
}

}  // namespace

void run_capacity_search(const ServeOptions& serve, const CapacityOptions& c) {
  const TrafficSpec spec = load_traffic_spec(serve.spec_path, serve.overrides);
  check_inputs(spec, serve, c);
  const StepCriteria criteria{spec.slo, c.percentile, c.min_goodput};
  Sweep sweep;
  sweep.closed_loop = spec.arrival == ArrivalKind::kClosedLoop;
  sweep.clients = c.clients > 0 ? c.clients : *std::max_element(spec.concurrency.begin(), spec.concurrency.end());
  sweep.requests = c.requests > 0 ? c.requests : spec.requests_per_cell;
  sweep.cache_hit_rate = spec.cache_hit_rates.front();
  sweep.seed = spec.seed;

  CapacitySearchOptions so;
  so.precision = c.precision;
  so.max_steps = c.max_steps;
  so.integer = sweep.closed_loop;
  so.min_load = sweep.closed_loop ? 1 : 1e-3;
  so.max_load = sweep.closed_loop ? 4096 : 1e6;
  so.start = c.start > 0 ? c.start : sweep.closed_loop ? double(spec.concurrency.front()) : spec.rate;

  const fs::path out(serve.out_dir);
  fs::create_directories(out);
  json steps = json::array();
  const CapacitySearchResult r = search_capacity(so, [&](double load) {
    steps.push_back(run_step(serve, sweep, criteria, load, steps.size()));
    return steps.back()["meets"].get<bool>();
  });
  json result = result_json(spec, serve, sweep, criteria, so, r, std::move(steps));
  if (serve.plots) {
    std::string warning;
    result["plots"] = write_capacity_plot(result, (out / "plots").string(), warning);
    if (!warning.empty()) std::fprintf(stderr, "capacity: warning: %s\n", warning.c_str());
  }
  write_text_file(out / "capacity.json", result.dump(2) + "\n");
  write_text_file(out / "capacity.md", capacity_markdown(result));
  std::fprintf(stderr, "capacity: wrote %s/capacity.json, capacity.md%s, steps/\n", serve.out_dir.c_str(),
               serve.plots ? ", plots/" : "");
  std::printf("%s\n", result["statement"].get<std::string>().c_str());
}

}  // namespace tokenmill::bench
