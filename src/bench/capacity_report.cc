#include "bench/capacity_report.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "bench/gnuplot.h"
#include "util/error.h"

namespace tokenmill::bench {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

double num_or_nan(const json& v) { return v.is_number() ? v.get<double>() : NAN; }

std::string whole_ms(const json& v) { return v.is_number() ? fmt::format("{:.0f}", v.get<double>()) : "-"; }

// "TTFT p99 <= 500 ms, E2E p99 <= 5000 ms, goodput >= 90 %"
std::string criteria_text(const json& c) {
  std::vector<std::string> parts;
  const double q = c["percentile"].get<double>();
  for (const char* k : {"ttft", "tpot", "e2e"}) {
    const double limit = c["slo_ms"][k].get<double>();
    if (limit > 0) {
      std::string name = k;
      std::transform(name.begin(), name.end(), name.begin(), [](unsigned char ch) { return std::toupper(ch); });
      parts.push_back(fmt::format("{} p{:g} <= {:g} ms", name, q, limit));
    }
  }
  parts.push_back(fmt::format("goodput >= {:g} %", 100 * c["min_goodput"].get<double>()));
  return fmt::format("{}", fmt::join(parts, ", "));
}

std::string load_text(const json& cap, double load) {
  if (cap["load_variable"] == "concurrency") return fmt::format("{:g} concurrent clients", load);
  return fmt::format("{:.4g} req/s", load);
}

// Steps ordered by load, for the table and the plot.
std::vector<const json*> by_load(const json& cap) {
  std::vector<const json*> s;
  for (const json& step : cap["steps"]) s.push_back(&step);
  std::stable_sort(s.begin(), s.end(), [](const json* a, const json* b) {
    return num_or_nan((*a)["offered_load"]) < num_or_nan((*b)["offered_load"]);
  });
  return s;
}

}  // namespace

std::string capacity_statement(const json& cap) {
  const std::string within = "within SLO (" + criteria_text(cap["criteria"]) + ")";
  const json& hi = cap["capacity"];
  const json& lo = cap["first_failing"];
  if (!hi.is_number()) {
    return fmt::format("This server does not serve this traffic {} at any load tried (lowest: {}).", within,
                       lo.is_number() ? load_text(cap, lo.get<double>()) : "none");
  }
  std::string s = fmt::format("This server serves {} of this traffic {}", load_text(cap, hi.get<double>()), within);
  if (cap.contains("capacity_mean_req_per_s") && cap["arrival"] == "poisson_with_burst") {
    s += fmt::format("; {:.4g} req/s on average with the bursts", cap["capacity_mean_req_per_s"].get<double>());
  }
  if (!lo.is_number())
    return s + fmt::format("; every load tried met ({}), so it may serve more.", cap["stop_reason"].get<std::string>());
  if (!cap["converged"].get<bool>()) {
    return s + fmt::format("; {} fails ({}).", load_text(cap, lo.get<double>()), cap["stop_reason"].get<std::string>());
  }
  return s + fmt::format("; {} fails.", load_text(cap, lo.get<double>()));
}

std::string capacity_markdown(const json& cap) {
  const bool closed = cap["load_variable"] == "concurrency";
  std::string md = fmt::format("# Capacity: {}\n\n**{}**\n\n", cap["benchmark"].get<std::string>(),
                               cap["statement"].get<std::string>());
  const json& s = cap["search"];
  md += fmt::format(
      "Target {}, arrival {}, spec hash `{}`. Swept: {}; {} requests per step{}, cache-hit rate {:g}; "
      "search stopped: {}. Latencies count from each request's arrival.\n\n",
      cap["url"].get<std::string>(), cap["arrival"].get<std::string>(), cap["spec_hash"].get<std::string>(),
      closed ? "concurrent clients (closed loop)" : "traffic.rate (req/s)", s["requests_per_step"].get<int64_t>(),
      closed ? "" : fmt::format(" over {} client connections", s["clients"].get<int64_t>()),
      s["cache_hit_rate"].get<double>(), cap["stop_reason"].get<std::string>());
  // Beside the swept rate: its mean with the bursts, and the arrivals the
  // step's finite sample really had (what ok req/s is bounded by).
  md += fmt::format(
      "| step | {} | mean offered req/s | arrived req/s | ok req/s | goodput | goodput req/s | TTFT p50/p99 ms | "
      "TPOT p50/p99 ms | E2E p50/p99 ms | errors | rejected | verdict |\n",
      closed ? "clients" : "rate req/s");
  md += "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n";
  for (const json* p : by_load(cap)) {
    const json& t = *p;
    const json& l = t["latency_ms"];
    const std::string verdict =
        t["meets"].get<bool>()
            ? "meets"
            : fmt::format("fails: {}", fmt::join(t["reasons"].get<std::vector<std::string>>(), "; "));
    const auto rate_or_dash = [&](const char* key) {
      return t.contains(key) && t[key].is_number() ? fmt::format("{:.2f}", t[key].get<double>()) : std::string("-");
    };
    md += fmt::format(
        "| {} | {:g} | {} | {} | {:.2f} | {:.1f} % | {:.2f} | {} / {} | {} / {} | {} / {} | {:.1f} % | {:.1f} % | {} "
        "|\n",
        t["index"].get<int64_t>(), t["offered_load"].get<double>(), rate_or_dash("offered_req_per_s"),
        rate_or_dash("arrived_req_per_s"), t["achieved_req_per_s"].get<double>(),
        100 * t["goodput_share"].get<double>(), t["goodput_req_per_s"].get<double>(), whole_ms(l["ttft"]["p50"]),
        whole_ms(l["ttft"]["p99"]), whole_ms(l["tpot"]["p50"]), whole_ms(l["tpot"]["p99"]), whole_ms(l["e2e"]["p50"]),
        whole_ms(l["e2e"]["p99"]), 100 * (t["error_rate"].get<double>() + t["timeout_rate"].get<double>()),
        100 * t["rejection_rate"].get<double>(), verdict);
  }
  if (cap.contains("plots")) {
    for (const json& img : cap["plots"])
      md += fmt::format("\n![p99 latency and goodput vs load]({})\n", img.get<std::string>());
  }
  md += "\nEach step's own report is under its `report_dir` (steps/).\n";
  return md;
}

std::vector<std::string> write_capacity_plot(const json& cap, const std::string& dir_name, std::string& warning) {
  const fs::path dir(dir_name);
  fs::create_directories(dir);
  std::ofstream dat(dir / "capacity.dat");
  if (!dat) fail("cannot write '{}'", (dir / "capacity.dat").string());
  dat << "# load ttft_p99_ms tpot_p99_ms e2e_p99_ms goodput_share\n";
  for (const json* p : by_load(cap)) {
    const json& l = (*p)["latency_ms"];
    auto v = [](const json& x) { return x.is_number() ? fmt::format("{}", x.get<double>()) : std::string("NaN"); };
    dat << (*p)["offered_load"].get<double>() << ' ' << v(l["ttft"]["p99"]) << ' ' << v(l["tpot"]["p99"]) << ' '
        << v(l["e2e"]["p99"]) << ' ' << (*p)["goodput_share"].get<double>() << '\n';
  }
  dat.close();
  const bool closed = cap["load_variable"] == "concurrency";
  std::string script = fmt::format(
      "set terminal svg size 900,560 dynamic background rgb 'white' font 'sans,12'\n"
      "set output 'capacity.svg'\nset title 'p99 latency and goodput vs offered load'\n"
      "set xlabel '{}'\nset ylabel 'p99 latency (ms, from arrival)'\nset logscale y\n"
      "set y2label 'goodput share'\nset y2range [0:1.05]\nset y2tics\nset ytics nomirror\n"
      "set key outside right top\nset grid\n",
      closed ? "concurrent clients" : "offered rate (traffic.rate, req/s)");
  if (cap["capacity"].is_number()) {
    script += fmt::format(
        "set arrow from {0}, graph 0 to {0}, graph 1 nohead dt 3 lw 2\n"
        "set label 'capacity' at {0}, graph 0.95 offset 0.5,0\n",
        cap["capacity"].get<double>());
  }
  script +=
      "plot 'capacity.dat' using 1:2 with linespoints lw 2 title 'TTFT p99', "
      "'' using 1:3 with linespoints lw 2 title 'TPOT p99', "
      "'' using 1:4 with linespoints lw 2 title 'E2E p99', "
      "'' using 1:5 axes x1y2 with linespoints lw 2 dt 2 title 'goodput share'\n";
  std::ofstream(dir / "capacity.gp") << script;
  if (cap["steps"].empty()) {
    warning = "no steps: nothing to plot";
    return {};
  }
  if (!render_gnuplot(dir.string(), "capacity.gp", warning)) return {};
  return {(dir.filename() / "capacity.svg").string()};
}

}  // namespace tokenmill::bench
