// Plots with gnuplot (an external program, not linked): TTFT and TPOT CDFs
// per cell, and latency against output throughput across concurrency. The
// data and the script are written beside the images so a reader can redraw
// them with other settings.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>

#include "bench/gnuplot.h"
#include "bench/report.h"
#include "util/error.h"

namespace tokenmill::bench {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string cell_title(const CellPlan& c) { return fmt::format("c={} h={:g}", c.concurrency, c.cache_hit_rate); }

// Writes one CDF block per cell; returns the titles of non-empty blocks and
// the sample range (for a log axis).
std::vector<std::string> write_cdf(const RunPlan& plan, const RunResult& run, const fs::path& file, bool tpot,
                                   double& lo, double& hi) {
  std::ofstream out(file);
  if (!out) fail("cannot write '{}'", file.string());
  std::vector<std::string> titles;
  lo = INFINITY;
  hi = 0;
  for (size_t c = 0; c < run.cells.size(); ++c) {
    std::vector<double> v;
    for (const RequestRecord& r : run.cells[c].records) {
      if (r.status != RequestStatus::kOk) continue;
      const double x = tpot ? r.tpot_ms() : r.ttft_ms();
      if (std::isfinite(x)) v.push_back(x);
    }
    if (v.empty()) continue;
    std::sort(v.begin(), v.end());
    if (!titles.empty()) out << "\n\n";
    titles.push_back(cell_title(plan.cells[c]));
    for (size_t i = 0; i < v.size(); ++i) out << v[i] << ' ' << double(i + 1) / double(v.size()) << '\n';
    lo = std::min(lo, std::max(v.front(), 1e-3));
    hi = std::max(hi, v.back());
  }
  return titles;
}

std::string cdf_script(const std::string& name, const std::string& xlabel, const std::vector<std::string>& titles,
                       double lo, double hi) {
  std::string s = fmt::format(
      "set output '{0}.svg'\nset title '{1} CDF (ok requests)'\nset xlabel '{1} (ms)'\n"
      "set ylabel 'fraction of requests'\nset key bottom right\nset grid\nset yrange [0:1]\n{2}plot ",
      name, xlabel, hi > 30 * lo ? "set logscale x\n" : "unset logscale x\n");
  for (size_t i = 0; i < titles.size(); ++i) {
    s += fmt::format("{}'{}.dat' index {} using 1:2 with steps lw 2 title '{}'", i ? ", " : "", name, i, titles[i]);
  }
  return s + "\n";
}

// One block per cache-hit rate: concurrency, output tok/s, TTFT p50/p99, E2E p99.
std::string latency_vs_throughput(const json& report, const fs::path& dir) {
  std::map<double, std::vector<const json*>> by_rate;
  for (const json& c : report["cells"]) {
    if (c["input_bucket"] == "all") by_rate[c["cache_hit_rate"].get<double>()].push_back(&c);
  }
  std::ofstream out(dir / "latency_vs_throughput.dat");
  std::string plot;
  size_t block = 0;
  for (const auto& [rate, cells] : by_rate) {
    if (block) out << "\n\n";
    for (const json* c : cells) {
      const json& l = (*c)["latency_ms"];
      auto v = [](const json& x) { return x.is_number() ? x.get<double>() : NAN; };
      out << (*c)["concurrency"].get<int64_t>() << ' ' << (*c)["throughput"]["output_tok_per_s"].get<double>() << ' '
          << v(l["ttft"]["p50"]) << ' ' << v(l["ttft"]["p99"]) << ' ' << v(l["e2e"]["p99"]) << '\n';
    }
    plot += fmt::format(
        "{0}'latency_vs_throughput.dat' index {1} using 2:4 with linespoints lw 2 title 'TTFT p99, h={2:g}', "
        "'' index {1} using 2:5 with linespoints lw 2 dt 2 title 'E2E p99, h={2:g}', "
        "'' index {1} using 2:4:(sprintf('c=%d', $1)) with labels offset 0,1 notitle",
        block ? ", " : "", block, rate);
    ++block;
  }
  if (!block) return "";
  return "set output 'latency_vs_throughput.svg'\nset title 'Latency vs output throughput across concurrency'\n"
         "set xlabel 'output tokens / s'\nset ylabel 'latency (ms)'\nunset logscale x\nset autoscale y\n"
         "set yrange [0:*]\nset key outside right top\nset grid\nplot " +
         plot + "\n";
}

}  // namespace

std::vector<std::string> write_plots(const RunPlan& plan, const RunResult& run, const json& report,
                                     const std::string& dir_name, std::string& warning) {
  const fs::path dir(dir_name);
  fs::create_directories(dir);
  std::string script = "set terminal svg size 900,560 dynamic background rgb 'white' font 'sans,12'\n";
  std::vector<std::string> images;
  double lo = 0, hi = 0;
  const auto ttft = write_cdf(plan, run, dir / "ttft_cdf.dat", false, lo, hi);
  if (!ttft.empty()) {
    script += cdf_script("ttft_cdf", "TTFT", ttft, lo, hi);
    images.push_back("ttft_cdf.svg");
  }
  const auto tpot = write_cdf(plan, run, dir / "tpot_cdf.dat", true, lo, hi);
  if (!tpot.empty()) {
    script += cdf_script("tpot_cdf", "TPOT", tpot, lo, hi);
    images.push_back("tpot_cdf.svg");
  }
  const std::string lvt = latency_vs_throughput(report, dir);
  if (!lvt.empty()) {
    script += lvt;
    images.push_back("latency_vs_throughput.svg");
  }
  std::ofstream(dir / "plots.gp") << script;
  if (images.empty()) {
    warning = "no ok requests: nothing to plot";
    return {};
  }
  if (!render_gnuplot(dir.string(), "plots.gp", warning)) return {};
  std::vector<std::string> rel;
  for (const std::string& i : images) rel.push_back((dir.filename() / i).string());
  return rel;
}

}  // namespace tokenmill::bench
