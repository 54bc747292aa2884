// Markdown rendering of a report JSON (see report.h). Tables are built from
// the JSON only, so `report.md` always agrees with `report.json`.
#include <cmath>
#include <string>

#include <fmt/format.h>

#include "bench/report.h"
#include "bench/step_phases.h"

namespace tokenmill::bench {
namespace {

using nlohmann::json;

std::string ms(const json& v) {
  if (!v.is_number()) return "–";
  const double x = v.get<double>();
  if (x >= 100) return fmt::format("{:.0f}", x);
  return x >= 1 || x == 0 ? fmt::format("{:.1f}", x) : fmt::format("{:.2g}", x);
}
std::string num(const json& v, int digits = 1) {
  return v.is_number() ? fmt::format("{:.{}f}", v.get<double>(), digits) : "–";
}
std::string pct(const json& v) { return v.is_number() ? fmt::format("{:.1f}%", 100 * v.get<double>()) : "–"; }
std::string usd(const json& v) { return v.is_number() ? fmt::format("${:.3g}", v.get<double>()) : "–"; }
std::string text_or_dash(const json& v) {
  return v.is_string() && !v.get<std::string>().empty() ? v.get<std::string>() : "–";
}
std::string bytes(const json& v) {
  return v.is_number() ? fmt::format("{:.1f} MiB", v.get<double>() / (1024.0 * 1024.0)) : "–";
}

std::string cell_label(const json& c) {
  if (c["key"] == "overall") return "**overall**";
  const json& b = c["input_bucket"];
  const std::string bucket =
      b.is_array() ? fmt::format("in {}-{}", b[0].get<int64_t>(), b[1].get<int64_t>()) : "all lengths";
  return fmt::format("c={} h={:g} {}", c["concurrency"].get<int64_t>(), c["cache_hit_rate"].get<double>(), bucket);
}

void latency_table(const json& rows, std::string& md) {
  md +=
      "| cell | ok | TTFT p50 | TTFT p95 | TTFT p99 | TPOT p50 | TPOT p99 | ITL p50 | ITL p99 | E2E p50 | E2E p95 "
      "| E2E p99 | E2E max | queue p50 | queue p99 |\n";
  md += "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const json& c : rows) {
    const json& l = c["latency_ms"];
    md += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n", cell_label(c),
                      c["requests"]["ok"].get<int64_t>(), ms(l["ttft"]["p50"]), ms(l["ttft"]["p95"]),
                      ms(l["ttft"]["p99"]), ms(l["tpot"]["p50"]), ms(l["tpot"]["p99"]), ms(l["itl"]["p50"]),
                      ms(l["itl"]["p99"]), ms(l["e2e"]["p50"]), ms(l["e2e"]["p95"]), ms(l["e2e"]["p99"]),
                      ms(l["e2e"]["max"]), ms(l["queue"]["p50"]), ms(l["queue"]["p99"]));
  }
}

void throughput_table(const json& rows, std::string& md) {
  md +=
      "| cell | req/s | input tok/s | output tok/s | total tok/s | goodput req/s | success | error | timeout | "
      "rejected | cancelled | OOM |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const json& c : rows) {
    const json& t = c["throughput"];
    const json& r = c["rates"];
    md += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n", cell_label(c),
                      num(t["req_per_s"], 2), num(t["input_tok_per_s"]), num(t["output_tok_per_s"]),
                      num(t["total_tok_per_s"]), num(c["goodput"]["req_per_s"], 2), pct(r["success_rate"]),
                      pct(r["error_rate"]), pct(r["timeout_rate"]), pct(r["rejection_rate"]), pct(r["cancel_rate"]),
                      pct(r["oom_rate"]));
  }
}

void stages_table(const json& rows, std::string& md) {
  md += "| cell | client queue | server queue | prefill | decode | bottleneck |\n|---|---:|---:|---:|---:|---|\n";
  for (const json& c : rows) {
    const json& s = c["stages_ms"];
    const double total = s["client_queue"].get<double>() + s["server_queue"].get<double>() +
                         s["prefill"].get<double>() + s["decode"].get<double>();
    auto part = [&](const char* k) {
      const double v = s[k].get<double>();
      return total > 0 ? fmt::format("{} ms ({:.0f}%)", ms(v), 100 * v / total) : std::string("–");
    };
    md += fmt::format("| {} | {} | {} | {} | {} | **{}** |\n", cell_label(c), part("client_queue"),
                      part("server_queue"), part("prefill"), part("decode"), c["bottleneck"].get<std::string>());
  }
}

void server_table(const json& rows, std::string& md) {
  md +=
      "| cell | memory high-water | prefix-cache hit rate | source | planned shared tokens | cost/success | "
      "cost/M output tok |\n|---|---:|---:|---|---:|---:|---:|\n";
  for (const json& c : rows) {
    const json& s = c["server"];
    const json& cost = c["cost"];
    md += fmt::format("| {} | {} | {} | {} | {} | {} | {} |\n", cell_label(c), bytes(s["memory_high_water_bytes"]),
                      pct(s["prefix_cache_hit_rate"]), text_or_dash(s["prefix_cache_hit_rate_source"]),
                      pct(s["planned_shared_fraction"]), usd(cost["per_success_usd"]),
                      usd(cost["per_million_output_tokens_usd"]));
  }
}

// Only when some cell's responses reported speculative decoding.
void speculative_table(const json& rows, std::string& md) {
  bool any = false;
  for (const json& c : rows) any = any || c["speculative"].is_object();
  if (!any) return;
  md +=
      "\n| cell | draft tokens | accepted | acceptance rate | accepted per decode step |\n"
      "|---|---:|---:|---:|---:|\n";
  for (const json& c : rows) {
    const json& s = c["speculative"];
    if (!s.is_object()) {
      md += fmt::format("| {} | – | – | – | – |\n", cell_label(c));
      continue;
    }
    const json& per_step = s["accepted_per_decode_step"];
    md += fmt::format("| {} | {:.0f} | {:.0f} | {} | {} |\n", cell_label(c), s["draft_tokens"].get<double>(),
                      s["accepted_draft_tokens"].get<double>(), pct(s["acceptance_rate"]),
                      per_step.is_number() ? fmt::format("{:.2f}", per_step.get<double>()) : "–");
  }
}

// Only when some cell carries tokenmill's step phases: one row per cell and
// step kind that ran, per-step means in ms. The comm counters are not split
// by step kind, so syncs, bytes and link rate sit on the "all" rows.
void parallel_table(const json& rows, std::string& md) {
  bool any = false;
  for (const json& c : rows) any = any || c["server"]["parallel"].is_object();
  if (!any) return;
  md += "\n## Parallel phases and communication (mean ms per engine step)\n\n";
  md +=
      "| cell | layout | steps | kind | schedule | drafting | compute | communication | sampling | comm share | "
      "syncs/step | KiB/step | link Gb/s |\n|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const json& c : rows) {
    const json& p = c["server"]["parallel"];
    if (!p.is_object()) continue;
    const std::string layout = p["layout"].is_object() ? topology_name(p["layout"]) : "–";
    for (const char* kind : {"all", "prefill", "decode"}) {
      const json& k = p[kind];
      if (!k.is_object()) continue;
      const bool all = std::string(kind) == "all";
      const json kib = all && k["comm_bytes_per_step"].is_number()
                           ? json(k["comm_bytes_per_step"].get<double>() / 1024.0)
                           : json(nullptr);
      md +=
          fmt::format("| {} | {} | {:.0f} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n", cell_label(c), layout,
                      k["steps"].get<double>(), kind, ms(k["schedule_ms"]), ms(k["drafting_ms"]), ms(k["compute_ms"]),
                      ms(k["communication_ms"]), ms(k["sampling_ms"]), pct(k["communication_share"]),
                      all ? num(k["syncs_per_step"]) : "–", num(kib), all ? num(k["link_gbps"], 2) : "–");
    }
  }
}

std::string headline_text(const std::string& metric, const json& v) {
  if (!v.is_number()) return "–";
  const double x = v.get<double>();
  if (metric.ends_with("_ms")) return ms(v) + " ms";
  if (metric.ends_with("_rate") || metric.ends_with("_share")) return pct(v);
  if (metric == "cost_per_success" || metric == "cost_per_million_output_tokens") return usd(v);
  if (metric == "server_memory_bytes") return bytes(v);
  return fmt::format("{:.2f}", x);
}

}  // namespace

std::string report_markdown(const json& r) {
  std::string md = fmt::format("# Serving benchmark `{}`\n\n", r["benchmark"].get<std::string>());
  md += fmt::format("- target: {} ({} endpoint, model `{}`, stream {})\n", r["target"]["url"].get<std::string>(),
                    r["target"]["endpoint"].get<std::string>(), r["target"]["model"].get<std::string>(),
                    r["target"]["stream"].get<bool>() ? "on" : "off");
  const json& shape = r["traffic_shape"];
  md += fmt::format("- traffic: {} arrivals, concurrency {}, cache_hit_rate {}, seed {}, spec hash `{}`\n",
                    shape["arrival"].get<std::string>(), shape["concurrency"].dump(), shape["cache_hit_rate"].dump(),
                    r["controls"]["random_seed"].dump(), r["spec_hash"].get<std::string>());
  auto label = [](const json& v) { return v.get<std::string>().empty() ? std::string("–") : v.get<std::string>(); };
  md += fmt::format("- hardware: {}; driver: {}; started {}; warmup {} requests (excluded)\n\n",
                    label(r["controls"]["hardware"]), label(r["controls"]["driver"]),
                    r["started_at"].get<std::string>(), r["warmup"]["requests"].dump());
  const json& o = r["overall"];
  md += fmt::format("**Bottleneck overall: {}.** Output {} tok/s, TTFT p99 {} ms, E2E p99 {} ms, success {}.\n\n",
                    o["bottleneck"].get<std::string>(), num(o["throughput"]["output_tok_per_s"]),
                    ms(o["latency_ms"]["ttft"]["p99"]), ms(o["latency_ms"]["e2e"]["p99"]),
                    pct(o["rates"]["success_rate"]));
  if (!r["headline"].empty()) {
    md += "| headline metric | value |\n|---|---:|\n";
    for (const json& k : r["report_metrics"]) {  // in the spec's order
      const std::string m = k.get<std::string>();
      md += fmt::format("| {} | {} |\n", m, headline_text(m, r["headline"].value(m, json())));
    }
    md += "\n";
  }
  const json& cl = r["client"];
  md += fmt::format("Client: {} threads, {:.2f} CPU cores, {:.1f} us per chunk, dispatch lag p99 {} ms.\n",
                    cl["client_threads_max"].get<int64_t>(), cl["cpu_cores_used"].get<double>(),
                    cl["chunk_handling_us_mean"].get<double>(), ms(cl["dispatch_lag_ms"]["p99"]));
  for (const json& w : cl["warnings"]) md += "\n> **Warning:** " + w.get<std::string>() + "\n";
  const int64_t reconnected = o["requests"].value("reconnected", int64_t{0});
  if (reconnected > 0) {
    md += fmt::format(
        "\n{} requests were sent again on a fresh connection: the server had closed the kept-alive one before "
        "answering (records: `reconnects`). Their latency includes the reconnection.\n",
        reconnected);
  }
  json rows = r["cells"];
  rows.push_back(o);
  md += "\n## Where the time goes (mean ms per ok request)\n\n";
  stages_table(rows, md);
  md += "\n## Latency (ms)\n\n";
  latency_table(rows, md);
  md += "\n## Throughput, goodput and failures\n\n";
  throughput_table(rows, md);
  md += "\n## Server and cost\n\n";
  server_table(rows, md);
  speculative_table(rows, md);
  parallel_table(rows, md);
  if (r.contains("plots") && !r["plots"].empty()) {
    md += "\n## Plots\n\n";
    for (const json& p : r["plots"]) md += fmt::format("![{}]({})\n\n", p.get<std::string>(), p.get<std::string>());
  }
  return md;
}

}  // namespace tokenmill::bench
