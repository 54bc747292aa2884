#include "bench/report.h"

#include <algorithm>
#include <cmath>
#include <thread>

#include <fmt/format.h>

#include "bench/json_number.h"
#include "bench/stats.h"

namespace tokenmill::bench {
namespace {

using nlohmann::json;

bool is_ok(const RequestRecord& r) { return r.status == RequestStatus::kOk; }
bool has_stream(const RequestRecord& r) {
  return (r.status == RequestStatus::kOk || r.status == RequestStatus::kCancelled) && !std::isnan(r.first_token_ms);
}

int64_t input_tokens_of(const RequestRecord& r) {
  return r.prompt_tokens >= 0 ? r.prompt_tokens : r.planned_input_tokens;
}
int64_t output_tokens_of(const RequestRecord& r) {
  return r.status == RequestStatus::kOk || r.status == RequestStatus::kCancelled ? std::max<int64_t>(0, r.output_tokens)
                                                                                 : 0;
}

bool meets_slo(const RequestRecord& r, const Slo& slo) {
  if (!is_ok(r)) return false;
  auto within = [](double v, double limit) { return limit <= 0 || (!std::isnan(v) && v <= limit); };
  return within(r.ttft_ms(), slo.ttft_ms) && within(r.tpot_ms(), slo.tpot_ms) && within(r.e2e_ms(), slo.e2e_ms);
}

json latency_json(const std::vector<const RequestRecord*>& recs) {
  std::vector<double> queue, ttft, tpot, itl, e2e, sched, prefill, decode;
  for (const RequestRecord* r : recs) {
    if (has_stream(*r)) {
      ttft.push_back(r->ttft_ms());
      for (size_t i = 1; i < r->chunk_ms.size(); ++i) itl.push_back(r->chunk_ms[i] - r->chunk_ms[i - 1]);
    }
    sched.push_back(r->sched_delay_ms());
    if (!is_ok(*r)) continue;
    queue.push_back(r->server_queue_ms);
    tpot.push_back(r->tpot_ms());
    e2e.push_back(r->e2e_ms());
    const double q = std::isnan(r->server_queue_ms) ? 0.0 : r->server_queue_ms;
    prefill.push_back(r->ttft_ms() - q);
    decode.push_back(r->e2e_ms() - r->ttft_ms());
  }
  return {{"queue", summary_to_json(summarize(queue))},     {"ttft", summary_to_json(summarize(ttft))},
          {"tpot", summary_to_json(summarize(tpot))},       {"itl", summary_to_json(summarize(itl))},
          {"e2e", summary_to_json(summarize(e2e))},         {"sched_delay", summary_to_json(summarize(sched))},
          {"prefill", summary_to_json(summarize(prefill))}, {"decode", summary_to_json(summarize(decode))}};
}

json counts_json(const std::vector<const RequestRecord*>& recs, int64_t& sent, int64_t& ok) {
  int64_t by[7] = {0};
  int64_t reconnected = 0;
  for (const RequestRecord* r : recs) {
    ++by[static_cast<int>(r->status)];
    if (r->reconnects > 0) ++reconnected;
  }
  sent = static_cast<int64_t>(recs.size()) - by[static_cast<int>(RequestStatus::kNotSent)];
  ok = by[static_cast<int>(RequestStatus::kOk)];
  json counts = {{"sent", sent}};
  for (int s = 0; s < 7; ++s) counts[status_name(static_cast<RequestStatus>(s))] = by[s];
  // Requests sent again because the server had closed the kept-alive
  // connection (any status): shown, not hidden, though not failures.
  counts["reconnected"] = reconnected;
  return counts;
}

json rates_json(const json& counts, int64_t sent) {
  const double n = static_cast<double>(sent);
  return {{"success_rate", ratio_or_zero(counts["ok"].get<double>(), n)},
          {"error_rate", ratio_or_zero(counts["error"].get<double>(), n)},
          {"timeout_rate", ratio_or_zero(counts["timeout"].get<double>(), n)},
          {"rejection_rate", ratio_or_zero(counts["rejected"].get<double>(), n)},
          {"cancel_rate", ratio_or_zero(counts["cancelled"].get<double>(), n)},
          {"oom_rate", ratio_or_zero(counts["oom"].get<double>(), n)}};
}

// Server-side view: memory, prefix-cache hit rate and, from tokenmill's step
// phase counters, the communication share and the parallel breakdown
// (step_phases.h; null for servers that do not export them, so the
// communication gate reads not_measured). The hit rate comes from /metrics
// counters when exported, else from per-response cached-token counts;
// `planned_shared_fraction` is what the traffic made reusable.
json server_json(const std::vector<const RequestRecord*>& recs, const ServerCellStats* server) {
  double cached = 0, prompt_with_cached = 0, shared = 0, planned = 0;
  bool any_cached = false;
  for (const RequestRecord* r : recs) {
    planned += static_cast<double>(r->planned_input_tokens);
    shared += static_cast<double>(r->planned_shared_tokens);
    if (!is_ok(*r) || r->cached_tokens < 0) continue;
    any_cached = true;
    cached += static_cast<double>(r->cached_tokens);
    prompt_with_cached += static_cast<double>(input_tokens_of(*r));
  }
  json out = {{"planned_shared_fraction", ratio_or_zero(shared, planned)},
              {"prefix_cache_hit_rate", nullptr},
              {"prefix_cache_hit_rate_source", nullptr},
              {"memory_high_water_bytes", nullptr},
              {"memory_source", nullptr},
              {"communication_share", nullptr},
              {"parallel", nullptr}};
  if (server && server->prefix_hit_tokens >= 0 && server->prefix_miss_tokens >= 0) {
    const double looked_up = server->prefix_hit_tokens + server->prefix_miss_tokens;
    out["prefix_cache_hit_rate"] = ratio_or_zero(server->prefix_hit_tokens, looked_up);
    out["prefix_cache_hit_rate_source"] = "metrics";
  } else if (any_cached) {
    out["prefix_cache_hit_rate"] = ratio_or_zero(cached, prompt_with_cached);
    out["prefix_cache_hit_rate_source"] = "responses";
  }
  if (server && server->memory_high_water_bytes >= 0) {
    out["memory_high_water_bytes"] = server->memory_high_water_bytes;
    out["memory_source"] = server->memory_source;
  }
  if (server && server->step_phases) {
    out["communication_share"] = number_or_null(communication_share(*server->step_phases));
    out["parallel"] = parallel_json(*server->step_phases);
  }
  return out;
}

struct CellInput {
  std::vector<const RequestRecord*> recs;
  double window_s = 0;
  double cost_usd = 0;
  const ServerCellStats* server = nullptr;
};

// Speculative decoding as the responses report it (null when none did):
// acceptance rate = accepted / proposed draft tokens; accepted per decode
// step = accepted draft tokens / the target's decode steps, each step
// emitting 1 + its accepted tokens (so steps = output - 1 - accepted).
json speculative_json(const std::vector<const RequestRecord*>& recs) {
  double drafted = 0, accepted = 0, steps = 0;
  bool any = false;
  for (const RequestRecord* r : recs) {
    if (!is_ok(*r) || r->draft_tokens < 0 || r->accepted_draft_tokens < 0) continue;
    any = true;
    drafted += static_cast<double>(r->draft_tokens);
    accepted += static_cast<double>(r->accepted_draft_tokens);
    steps += std::max(0.0, static_cast<double>(output_tokens_of(*r) - 1 - r->accepted_draft_tokens));
  }
  if (!any) return nullptr;
  return {{"draft_tokens", drafted},
          {"accepted_draft_tokens", accepted},
          {"acceptance_rate", drafted > 0 ? json(accepted / drafted) : json(nullptr)},
          {"accepted_per_decode_step", steps > 0 ? json(accepted / steps) : json(nullptr)}};
}

json cell_json(const CellInput& in, const Slo& slo) {
  int64_t sent = 0, ok = 0;
  json counts = counts_json(in.recs, sent, ok);
  double input = 0, output = 0, good = 0;
  for (const RequestRecord* r : in.recs) {
    if (r->status == RequestStatus::kNotSent) continue;
    if (is_ok(*r)) input += static_cast<double>(input_tokens_of(*r));
    output += static_cast<double>(output_tokens_of(*r));
    if (meets_slo(*r, slo)) good += 1;
  }
  std::vector<const RequestRecord*> ok_recs;
  for (const RequestRecord* r : in.recs) {
    if (is_ok(*r)) ok_recs.push_back(r);
  }
  const StageSplit split = stage_split(ok_recs);
  const double w = in.window_s;
  json j = {{"requests", counts},
            {"rates", rates_json(counts, sent)},
            {"latency_ms", latency_json(in.recs)},
            {"throughput",
             {{"window_s", w},
              {"req_per_s", ratio_or_zero(double(ok), w)},
              {"input_tok_per_s", ratio_or_zero(input, w)},
              {"output_tok_per_s", ratio_or_zero(output, w)},
              {"total_tok_per_s", ratio_or_zero(input + output, w)}}},
            {"tokens", {{"input", input}, {"output", output}}},
            {"goodput", {{"req_per_s", ratio_or_zero(good, w)}, {"fraction", ratio_or_zero(good, double(sent))}}},
            {"stages_ms",
             {{"client_queue", split.client_queue_ms},
              {"server_queue", split.server_queue_ms},
              {"prefill", split.prefill_ms},
              {"decode", split.decode_ms}}},
            {"bottleneck", split.bottleneck},
            {"server", server_json(in.recs, in.server)},
            {"speculative", speculative_json(in.recs)},
            {"cost",
             {{"usd", in.cost_usd},
              {"per_success_usd", number_or_null(ok ? in.cost_usd / double(ok) : NAN)},
              {"per_success_cents", number_or_null(ok ? 100 * in.cost_usd / double(ok) : NAN)},
              {"per_million_output_tokens_usd", number_or_null(output > 0 ? in.cost_usd / output * 1e6 : NAN)}}}};
  const double fail_rate = 1.0 - ratio_or_zero(double(ok) + counts["cancelled"].get<double>(), double(sent));
  if (sent > 0 && fail_rate > 0.05) j["bottleneck"] = "failures";
  return j;
}

// Tokens the server processed for these requests (ok and cancelled ones).
double tokens_of(const std::vector<const RequestRecord*>& recs) {
  double t = 0;
  for (const RequestRecord* r : recs) {
    if (r->status == RequestStatus::kOk || r->status == RequestStatus::kCancelled) {
      t += double(input_tokens_of(*r) + output_tokens_of(*r));
    }
  }
  return t;
}

std::string fmt_rate(double h) { return fmt::format("{:g}", h); }

// The headline value of one `report:` metric, from a cell's JSON.
json headline_value(const json& c, const std::string& m) {
  const json& lat = c["latency_ms"];
  auto at = [&](const char* group, const char* stat) { return lat[group][stat]; };
  if (m == "queue_ms") return at("queue", "mean");
  if (m == "ttft_ms") return at("ttft", "p50");
  if (m == "tpot_ms") return at("tpot", "p50");
  if (m == "itl_ms") return at("itl", "p50");
  if (m == "e2e_ms" || m == "p50_ms") return at("e2e", "p50");
  if (m == "p95_ms") return at("e2e", "p95");
  if (m == "p99_ms") return at("e2e", "p99");
  if (c["throughput"].contains(m)) return c["throughput"][m];
  if (m == "goodput_req_per_s") return c["goodput"]["req_per_s"];
  if (c["rates"].contains(m)) return c["rates"][m];
  if (m == "cost_per_success") return c["cost"]["per_success_usd"];
  if (m == "cost_per_million_output_tokens") return c["cost"]["per_million_output_tokens_usd"];
  if (m == "prefix_cache_hit_rate") return c["server"]["prefix_cache_hit_rate"];
  if (m == "server_memory_bytes") return c["server"]["memory_high_water_bytes"];
  if (m == "communication_share") return c["server"]["communication_share"];
  if (m == "spec_acceptance_rate" || m == "spec_accepted_per_step") {
    const json& s = c["speculative"];
    if (!s.is_object()) return nullptr;
    return s[m == "spec_acceptance_rate" ? "acceptance_rate" : "accepted_per_decode_step"];
  }
  return nullptr;
}

// The whole run as the server saw it: counter deltas summed over cells (when
// every cell has them), the highest memory sample, or the lifetime peak RSS.
ServerCellStats combine(const RunResult& run) {
  ServerCellStats t;
  t.prefix_hit_tokens = t.prefix_miss_tokens = run.server.empty() ? -1 : 0;
  if (!run.server.empty()) {
    t.step_phases = StepPhaseCounters{};
    t.step_phases->comm_bytes = t.step_phases->comm_syncs = 0;
  }
  for (const ServerCellStats& s : run.server) {
    if (s.step_phases && t.step_phases) {
      accumulate(*t.step_phases, *s.step_phases);
    } else {
      t.step_phases.reset();
    }
    t.metrics_available = t.metrics_available || s.metrics_available;
    if (s.prefix_hit_tokens < 0 || s.prefix_miss_tokens < 0 || t.prefix_hit_tokens < 0) {
      t.prefix_hit_tokens = t.prefix_miss_tokens = -1;
    } else {
      t.prefix_hit_tokens += s.prefix_hit_tokens;
      t.prefix_miss_tokens += s.prefix_miss_tokens;
    }
    if (s.memory_high_water_bytes > t.memory_high_water_bytes) {
      t.memory_high_water_bytes = s.memory_high_water_bytes;
      t.memory_source = s.memory_source;
    }
  }
  if (run.server_peak_rss_bytes && *run.server_peak_rss_bytes > t.memory_high_water_bytes) {
    t.memory_high_water_bytes = *run.server_peak_rss_bytes;
    t.memory_source = "proc VmHWM";
  }
  return t;
}

}  // namespace

StageSplit stage_split(const std::vector<const RequestRecord*>& ok) {
  StageSplit s;
  if (ok.empty()) {
    s.bottleneck = "none (no ok requests)";
    return s;
  }
  for (const RequestRecord* r : ok) {
    const double sched = r->sched_delay_ms();
    const double q = std::isnan(r->server_queue_ms) ? 0 : r->server_queue_ms;
    const double ttft = std::isnan(r->ttft_ms()) ? r->e2e_ms() : r->ttft_ms();
    s.client_queue_ms += std::isnan(sched) ? 0 : std::max(0.0, sched);
    s.server_queue_ms += q;
    s.prefill_ms += std::max(0.0, ttft - q);
    s.decode_ms += std::max(0.0, r->e2e_ms() - ttft);
  }
  const double n = static_cast<double>(ok.size());
  s.client_queue_ms /= n;
  s.server_queue_ms /= n;
  s.prefill_ms /= n;
  s.decode_ms /= n;
  // Without the server's queue time, waiting in its queue is inside TTFT.
  const bool queue_known =
      std::any_of(ok.begin(), ok.end(), [](const RequestRecord* r) { return !std::isnan(r->server_queue_ms); });
  const std::pair<double, const char*> stages[] = {
      {s.client_queue_ms, "client queue (concurrency cap)"},
      {s.server_queue_ms, "server queue"},
      {s.prefill_ms, queue_known ? "prefill" : "prefill + server queue (not reported)"},
      {s.decode_ms, "decode"}};
  s.bottleneck = std::max_element(std::begin(stages), std::end(stages))->second;
  return s;
}

namespace {

// Every cell of the run: each (concurrency, cache_hit_rate) over all
// buckets, then per input bucket. Accumulates the run's records, window and cost.
json all_cells(const TrafficSpec& spec, const RunPlan& plan, const RunResult& run,
               std::vector<const RequestRecord*>& all, double& total_window, double& total_cost) {
  json cells = json::array();
  for (size_t c = 0; c < run.cells.size(); ++c) {
    const CellRun& cr = run.cells[c];
    CellInput whole;
    for (const RequestRecord& r : cr.records) whole.recs.push_back(&r);
    whole.window_s = (cr.window_end_ms - cr.window_start_ms) / 1000.0;
    whole.cost_usd = whole.window_s * spec.usd_per_hour / 3600.0;
    whole.server = c < run.server.size() ? &run.server[c] : nullptr;
    total_window += whole.window_s;
    total_cost += whole.cost_usd;
    all.insert(all.end(), whole.recs.begin(), whole.recs.end());
    const double cell_tokens = tokens_of(whole.recs);
    const std::string base = fmt::format("c{}_h{}", plan.cells[c].concurrency, fmt_rate(plan.cells[c].cache_hit_rate));
    auto add = [&](const CellInput& in, const std::string& key, json bucket) {
      json j = cell_json(in, spec.slo);
      j["key"] = key;
      j["concurrency"] = plan.cells[c].concurrency;
      j["cache_hit_rate"] = plan.cells[c].cache_hit_rate;
      j["input_bucket"] = std::move(bucket);
      cells.push_back(std::move(j));
    };
    add(whole, base + "_all", "all");
    for (size_t b = 0; b < spec.input_buckets.size() && spec.input_buckets.size() > 1; ++b) {
      CellInput part = whole;
      part.recs.clear();
      for (const RequestRecord* r : whole.recs) {
        if (r->input_bucket == int32_t(b)) part.recs.push_back(r);
      }
      part.cost_usd = whole.cost_usd * ratio_or_zero(tokens_of(part.recs), cell_tokens);
      part.server = nullptr;  // server counters cover the whole cell only
      add(part, fmt::format("{}_b{}", base, b), json::array({spec.input_buckets[b].min, spec.input_buckets[b].max}));
    }
  }
  return cells;
}

json gates_json(const Gates& g) {
  return {{"quality_regression", g.quality_regression},
          {"p99_budget_breach", g.p99_budget_breach},
          {"p99_budget_ms", g.p99_budget_ms},
          {"p99_tolerance", g.p99_tolerance},
          {"max_success_rate_drop", g.max_success_rate_drop},
          {"min_improvement", g.min_improvement},
          {"max_regression", g.max_regression},
          {"max_communication_share", g.max_communication_share},
          {"min_spec_acceptance_rate", g.min_spec_acceptance_rate},
          {"min_slice_requests", g.min_slice_requests}};
}

}  // namespace

json build_report(const TrafficSpec& spec, const RunPlan& plan, const RunResult& run) {
  std::vector<const RequestRecord*> all;
  double total_window = 0, total_cost = 0;
  json cells = all_cells(spec, plan, run, all, total_window, total_cost);
  const ServerCellStats server_total = combine(run);
  json o = cell_json(CellInput{all, total_window, total_cost, &server_total}, spec.slo);
  o["key"] = "overall";
  json headline = json::object();
  for (const std::string& m : spec.report_metrics) headline[m] = headline_value(o, m);
  int64_t warm_ok = 0;
  for (const RequestRecord& r : run.warmup.records) warm_ok += is_ok(r);
  return {
      {"format", "tokenmill-bench-report/1"},
      {"benchmark", spec.name},
      {"spec_hash", traffic_shape_hash(spec)},
      {"traffic_shape", traffic_shape_json(spec)},
      {"target",
       {{"url", run.url}, {"endpoint", endpoint_name(spec.endpoint)}, {"model", spec.model}, {"stream", spec.stream}}},
      {"controls",
       {{"random_seed", spec.seed},
        {"warmup_requests", spec.warmup_requests},
        {"hardware", spec.hardware},
        {"driver", spec.driver}}},
      {"cost_model", {{"usd_per_hour", spec.usd_per_hour}}},
      {"slo", {{"ttft_ms", spec.slo.ttft_ms}, {"tpot_ms", spec.slo.tpot_ms}, {"e2e_ms", spec.slo.e2e_ms}}},
      {"gates", gates_json(spec.gates)},
      {"report_metrics", spec.report_metrics},
      {"started_at", run.started_at},
      {"warmup", {{"requests", run.warmup.records.size()}, {"ok", warm_ok}}},
      {"client", driver_report(run)},
      {"headline", headline},
      {"cells", cells},
      {"overall", o}};
}

json driver_report(const RunResult& run) {
  DriverStats total;
  std::vector<double> lag;
  for (const CellRun& c : run.cells) {
    total.wall_s += c.driver.wall_s;
    total.cpu_s += c.driver.cpu_s;
    total.threads = std::max(total.threads, c.driver.threads);
    total.chunks += c.driver.chunks;
    total.handling_ms += c.driver.handling_ms;
    total.handling_max_ms = std::max(total.handling_max_ms, c.driver.handling_max_ms);
    for (const RequestRecord& r : c.records) lag.push_back(r.dispatch_lag_ms);
  }
  const Summary lag_s = summarize(lag);
  const double cores = ratio_or_zero(total.cpu_s, total.wall_s);
  const double handling_us = total.chunks ? 1000.0 * total.handling_ms / double(total.chunks) : 0.0;
  json warnings = json::array();
  // Ten percent of the machine: enough to slow a CPU-bound server beside it.
  const double core_limit = std::max(0.2, 0.1 * double(std::thread::hardware_concurrency()));
  if (cores > core_limit) {
    warnings.push_back(
        fmt::format("the client used {:.2f} CPU cores on average; on a machine shared with the "
                    "server it may be the bottleneck or slow the server down",
                    cores));
  }
  if (lag_s.count > 0 && lag_s.p99 > 5.0) {
    warnings.push_back(
        fmt::format("scheduled requests left {:.1f} ms late at p99 with a client idle: the client "
                    "cannot keep the arrival schedule (timer or CPU starvation)",
                    lag_s.p99));
  }
  if (handling_us > 200) {
    warnings.push_back(
        fmt::format("{:.0f} us per received chunk: client-side parsing distorts token times", handling_us));
  }
  return {{"wall_s", total.wall_s},
          {"cpu_s", total.cpu_s},
          {"cpu_cores_used", cores},
          {"client_threads_max", total.threads},
          {"chunks", total.chunks},
          {"chunk_handling_us_mean", handling_us},
          {"chunk_handling_ms_max", total.handling_max_ms},
          {"dispatch_lag_ms", summary_to_json(lag_s)},
          {"warnings", warnings}};
}

}  // namespace tokenmill::bench
