#include "bench/serve_run.h"

#include <httplib.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "bench/driver.h"
#include "bench/plan.h"
#include "bench/report.h"
#include "bench/server_monitor.h"
#include "bench/token_counter.h"
#include "util/error.h"

namespace tokenmill::bench {
namespace {

namespace fs = std::filesystem;

std::string utc_now_iso() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// Any HTTP answer means the server is there; only a transport failure stops
// the run. Returns the first served model's id ("" when not listed).
std::string check_reachable(const std::string& url) {
  const HttpTarget t = parse_target_url(url);
  httplib::Client client(t.origin);
  client.set_connection_timeout(5, 0);
  client.set_read_timeout(30, 0);
  const httplib::Result res = client.Get(t.prefix + "/v1/models");
  if (!res) fail("cannot reach the server at {}: {}", url, httplib::to_string(res.error()));
  const nlohmann::json j = nlohmann::json::parse(res->body, nullptr, false);
  if (res->status == 200 && j.is_object() && j.contains("data") && j["data"].is_array() && !j["data"].empty() &&
      j["data"][0].is_object() && j["data"][0].contains("id") && j["data"][0]["id"].is_string()) {
    return j["data"][0]["id"].get<std::string>();
  }
  return "";
}

void print_cell(size_t i, size_t n, const CellPlan& plan, const nlohmann::json& cell) {
  auto v = [&](const char* p) {
    const nlohmann::json& x = cell[nlohmann::json::json_pointer(p)];
    return x.is_number() ? x.get<double>() : NAN;
  };
  const int64_t reconnected = cell["requests"].value("reconnected", int64_t{0});
  const std::string resent =
      reconnected > 0 ? fmt::format(" ({} resent: the server had closed the kept-alive connection)", reconnected) : "";
  std::fprintf(stderr,
               "bench: cell %zu/%zu c=%lld h=%g: %lld/%lld ok%s, TTFT p50 %.0f ms p99 %.0f ms, TPOT p50 %.1f ms, "
               "%.1f output tok/s, bottleneck %s\n",
               i + 1, n, static_cast<long long>(plan.concurrency), plan.cache_hit_rate,
               static_cast<long long>(cell["requests"]["ok"].get<int64_t>()),
               static_cast<long long>(cell["requests"]["sent"].get<int64_t>()), resent.c_str(),
               v("/latency_ms/ttft/p50"), v("/latency_ms/ttft/p99"), v("/latency_ms/tpot/p50"),
               v("/throughput/output_tok_per_s"), cell["bottleneck"].get<std::string>().c_str());
}

// Runs every cell in order, printing one line per cell; returns the records as JSONL.
std::string run_cells(const TrafficSpec& spec, const RunPlan& plan, const Driver& driver, ServerMonitor& monitor,
                      RunResult& run) {
  std::string records;
  for (size_t i = 0; i < plan.cells.size(); ++i) {
    monitor.begin_cell();
    run.cells.push_back(driver.run(plan.cells[i].requests, plan.cells[i].concurrency, spec.duration_s));
    run.server.push_back(monitor.end_cell());
    for (const RequestRecord& r : run.cells.back().records) records += record_to_json(r).dump() + "\n";
    RunResult one_run;
    one_run.cells = {run.cells.back()};
    one_run.server = {run.server.back()};
    RunPlan one_plan;
    one_plan.cells = {plan.cells[i]};
    print_cell(i, plan.cells.size(), plan.cells[i], build_report(spec, one_plan, one_run)["cells"][0]);
  }
  return records;
}

}  // namespace

ServeOutcome run_serve_benchmark(const ServeOptions& o) {
  ServeOutcome outcome;
  TrafficSpec& spec = outcome.spec;
  spec = load_traffic_spec(o.spec_path, o.overrides);
  if (!o.tokenizer_gguf.empty()) {
    spec.token_counter = TokenCounterKind::kGguf;
    spec.tokenizer_path = o.tokenizer_gguf;
  }
  const std::string url = o.url.empty() ? spec.url : o.url;
  parse_target_url(url);
  const fs::path out(o.out_dir);
  fs::create_directories(out);
  if (!o.dry_run || spec.token_counter == TokenCounterKind::kServer) {
    const std::string served = check_reachable(url);
    if (spec.model.empty()) spec.model = served;
  }
  const auto plan_start = std::chrono::steady_clock::now();
  outcome.plan = make_run_plan(spec, make_token_counter(spec, url));
  const RunPlan& plan = outcome.plan;
  write_text_file(out / "plan.jsonl", plan_to_jsonl(plan));
  size_t total = plan.warmup.size();
  for (const CellPlan& c : plan.cells) total += c.requests.size();
  std::fprintf(stderr, "bench: planned %zu requests in %zu cells (+%zu warmup) in %.1f s; spec hash %s\n", total,
               plan.cells.size(), plan.warmup.size(),
               std::chrono::duration<double>(std::chrono::steady_clock::now() - plan_start).count(),
               traffic_shape_hash(spec).c_str());
  if (o.dry_run) return outcome;

  RunResult& run = outcome.run;
  run.url = url;
  run.started_at = utc_now_iso();
  const Driver driver(spec, url, SteadyClock::now());
  ServerMonitor monitor(url, spec.server_metrics, spec.metrics_interval_s, o.server_pid);
  if (!plan.warmup.empty()) {
    std::fprintf(stderr, "bench: warmup, %zu requests\n", plan.warmup.size());
    run.warmup = driver.run(plan.warmup, plan.cells.front().concurrency, 0);
  }
  const std::string records = run_cells(spec, plan, driver, monitor, run);
  run.server_peak_rss_bytes = monitor.lifetime_peak_rss();
  outcome.report = build_report(spec, plan, run);
  nlohmann::json& report = outcome.report;
  if (o.plots) {
    std::string warning;
    report["plots"] = write_plots(plan, run, report, (out / "plots").string(), warning);
    if (!warning.empty()) std::fprintf(stderr, "bench: warning: %s\n", warning.c_str());
  }
  write_text_file(out / "records.jsonl", records);
  write_text_file(out / "report.json", report.dump(2) + "\n");
  write_text_file(out / "report.md", report_markdown(report));
  for (const auto& w : report["client"]["warnings"]) {
    std::fprintf(stderr, "bench: warning: %s\n", w.get<std::string>().c_str());
  }
  std::fprintf(stderr, "bench: wrote %s/report.json, report.md, records.jsonl, plan.jsonl%s\n", o.out_dir.c_str(),
               report.contains("plots") && !report["plots"].empty() ? ", plots/" : "");
  return outcome;
}

void write_text_file(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  if (!out || !(out << text)) fail("cannot write '{}'", path.string());
}

}  // namespace tokenmill::bench
