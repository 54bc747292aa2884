// `tokenmill bench compare BEFORE.json AFTER.json`: two `bench serve`
// reports of the same traffic shape -> an optimization ticket (YAML) with
// gates, per-slice deltas and a decision (rule: src/bench/ticket.h).
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "bench/ticket.h"
#include "bench/traffic_spec.h"
#include "cli/commands.h"
#include "util/error.h"

namespace tokenmill::cli {
namespace {

struct CompareFlags {
  std::string before, after, gates, quality_before, quality_after, change, slice, cell, out;
};

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  if (!in) fail("cannot open '{}'", path);
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded()) fail("{}: not valid JSON", path);
  return j;
}

void run_compare(const CompareFlags& f) {
  if (f.quality_before.empty() != f.quality_after.empty()) {
    fail("--quality-before and --quality-after go together");
  }
  bench::CompareInput in;
  in.before = read_json(f.before);
  in.after = read_json(f.after);
  // Gates: the file's, else the ones the before run's spec carried.
  in.gates = f.gates.empty() ? bench::gates_from_report(in.before) : bench::load_gates_file(f.gates);
  if (!f.quality_before.empty()) {
    in.quality_before = bench::load_quality(f.quality_before);
    in.quality_after = bench::load_quality(f.quality_after);
  }
  in.change = f.change;
  in.slice = f.slice;
  in.cell = f.cell;
  const std::string yaml = bench::ticket_yaml(bench::decide(in));
  if (!f.out.empty()) {
    std::ofstream out(f.out);
    if (!out || !(out << yaml)) fail("cannot write '{}'", f.out);
  }
  std::fputs(yaml.c_str(), stdout);
}

}  // namespace

void add_bench_compare_command(CLI::App& bench) {
  auto f = std::make_shared<CompareFlags>();
  CLI::App* cmd = bench.add_subcommand("compare", "Turn two bench serve reports into an optimization ticket");
  cmd->add_option("before", f->before, "Report of the baseline (report.json)")->required()->check(CLI::ExistingFile);
  cmd->add_option("after", f->after, "Report with the change (report.json)")->required()->check(CLI::ExistingFile);
  cmd->add_option("--gates", f->gates, "Gates file (YAML with a gates: map; default: the before spec's gates)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--quality-before", f->quality_before, "Quality JSON of the baseline ({\"score\": x} etc.)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--quality-after", f->quality_after, "Quality JSON with the change")->check(CLI::ExistingFile);
  cmd->add_option("--change", f->change, "What changed, e.g. int8_weight_only")->required();
  cmd->add_option("--slice", f->slice, "The traffic slice this ticket is about, e.g. long_context_rag")->required();
  cmd->add_option("--cell", f->cell, "Report cell for the headline card (e.g. c8_h0.5_all; default: overall)");
  cmd->add_option("-o,--out", f->out, "Also write the ticket to this file");
  cmd->callback([f] { run_compare(*f); });
}

}  // namespace tokenmill::cli
