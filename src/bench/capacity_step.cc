#include "bench/capacity_step.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bench/json_number.h"
#include "bench/stats.h"

namespace tokenmill::bench {
namespace {

double arrival_ms(const RequestRecord& r) { return std::isnan(r.scheduled_ms) ? r.send_ms : r.scheduled_ms; }

LatencyPercentiles percentiles(std::vector<double> v, double percentile) {
  v.erase(std::remove_if(v.begin(), v.end(), [](double x) { return !std::isfinite(x); }), v.end());
  LatencyPercentiles p;
  p.count = static_cast<int64_t>(v.size());
  if (v.empty()) {
    p.p50 = p.p99 = p.at_percentile = NAN;
    return p;
  }
  std::sort(v.begin(), v.end());
  p.p50 = percentile_sorted(v, 0.5);
  p.p99 = percentile_sorted(v, 0.99);
  p.at_percentile = percentile_sorted(v, percentile / 100);
  return p;
}

bool within(double v, double limit) { return limit <= 0 || (std::isfinite(v) && v <= limit); }

nlohmann::json latency_json(const LatencyPercentiles& p) {
  return {{"count", p.count},
          {"p50", number_or_null(p.p50)},
          {"p99", number_or_null(p.p99)},
          {"at_slo_percentile", number_or_null(p.at_percentile)}};
}

}  // namespace

StepMeasure measure_step(const CellRun& cell, const StepCriteria& c) {
  StepMeasure m;
  std::vector<double> ttft, tpot, e2e;
  double output_tokens = 0;
  double first_arrival = INFINITY, last_arrival = -INFINITY;
  for (const RequestRecord& r : cell.records) {
    if (r.status == RequestStatus::kNotSent) continue;
    ++m.sent;
    first_arrival = std::min(first_arrival, arrival_ms(r));
    last_arrival = std::max(last_arrival, arrival_ms(r));
    switch (r.status) {
      case RequestStatus::kCancelled: ++m.cancelled; break;
      case RequestStatus::kError: ++m.errors; break;
      case RequestStatus::kTimeout: ++m.timeouts; break;
      case RequestStatus::kRejected: ++m.rejected; break;
      case RequestStatus::kOom: ++m.oom; break;
      default: break;
    }
    if (r.status != RequestStatus::kOk) continue;
    ++m.ok;
    const double a = arrival_ms(r);
    const double t = r.first_token_ms - a, e = r.end_ms - a, p = r.tpot_ms();
    ttft.push_back(t);
    e2e.push_back(e);
    tpot.push_back(p);
    output_tokens += static_cast<double>(std::max<int64_t>(0, r.output_tokens));
    // A one-token reply has no TPOT; it cannot miss that SLO.
    const bool tpot_ok = std::isnan(p) || within(p, c.slo.tpot_ms);
    if (within(t, c.slo.ttft_ms) && tpot_ok && within(e, c.slo.e2e_ms)) ++m.good;
  }
  m.window_s = (cell.window_end_ms - cell.window_start_ms) / 1000.0;
  if (m.sent > 1 && last_arrival > first_arrival)
    m.arrived_req_per_s = double(m.sent - 1) / ((last_arrival - first_arrival) / 1000.0);
  m.achieved_req_per_s = ratio_or_zero(double(m.ok), m.window_s);
  m.output_tok_per_s = ratio_or_zero(output_tokens, m.window_s);
  m.goodput_share = ratio_or_zero(double(m.good), double(m.sent - m.cancelled));
  m.goodput_req_per_s = ratio_or_zero(double(m.good), m.window_s);
  m.ttft = percentiles(ttft, c.percentile);
  m.tpot = percentiles(tpot, c.percentile);
  m.e2e = percentiles(e2e, c.percentile);
  return m;
}

bool step_meets(const StepMeasure& m, const StepCriteria& c, std::vector<std::string>& reasons) {
  reasons.clear();
  if (m.ok == 0) reasons.push_back(fmt::format("no ok requests ({} sent)", m.sent));
  struct Check {
    const char* name;
    const LatencyPercentiles& latency;
    double limit_ms;
  };
  const Check checks[] = {
      {"TTFT", m.ttft, c.slo.ttft_ms}, {"TPOT", m.tpot, c.slo.tpot_ms}, {"E2E", m.e2e, c.slo.e2e_ms}};
  for (const Check& k : checks) {
    if (m.ok > 0 && !within(k.latency.at_percentile, k.limit_ms)) {
      reasons.push_back(
          fmt::format("{} p{:g} {:.1f} ms > {:g} ms", k.name, c.percentile, k.latency.at_percentile, k.limit_ms));
    }
  }
  if (m.goodput_share < c.min_goodput) {
    reasons.push_back(fmt::format("goodput {:.1f} % < {:g} %", 100 * m.goodput_share, 100 * c.min_goodput));
  }
  return reasons.empty();
}

nlohmann::json step_measure_json(const StepMeasure& m) {
  const double n = static_cast<double>(m.sent);
  return {
      {"requests",
       {{"sent", m.sent},
        {"ok", m.ok},
        {"good", m.good},
        {"cancelled", m.cancelled},
        {"error", m.errors},
        {"timeout", m.timeouts},
        {"rejected", m.rejected},
        {"oom", m.oom}}},
      {"window_s", m.window_s},
      {"arrived_req_per_s", m.arrived_req_per_s},
      {"achieved_req_per_s", m.achieved_req_per_s},
      {"output_tok_per_s", m.output_tok_per_s},
      {"goodput_share", m.goodput_share},
      {"goodput_req_per_s", m.goodput_req_per_s},
      {"error_rate", ratio_or_zero(double(m.errors + m.oom), n)},
      {"timeout_rate", ratio_or_zero(double(m.timeouts), n)},
      {"rejection_rate", ratio_or_zero(double(m.rejected), n)},
      {"latency_ms", {{"ttft", latency_json(m.ttft)}, {"tpot", latency_json(m.tpot)}, {"e2e", latency_json(m.e2e)}}}};
}

}  // namespace tokenmill::bench
