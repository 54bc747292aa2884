// `tokenmill bench comm-card --before A.json --after B.json`: two `bench
// serve` reports of the same traffic shape, before and after a change of
// parallel layout -> a parallel_comm_budget card (YAML) with a decision
// (rule: src/bench/comm_card.h). Prints the card and a one-line summary;
// exits 0 for every decision, not_measured included (the summary says why),
// and non-zero only for bad input.
#include <cstdio>
#include <ctime>
#include <fstream>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "bench/comm_card.h"
#include "cli/commands.h"
#include "util/error.h"

namespace tokenmill::cli {
namespace {

struct CommCardFlags {
  std::string before, after, phase = "decode", topology, id, cell, out;
  double max_share = 0;  // 0: not given
};

nlohmann::json read_report(const std::string& path) {
  std::ifstream in(path);
  if (!in) fail("cannot open '{}'", path);
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded()) fail("{}: not valid JSON", path);
  return j;
}

std::string utc_date() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[16];
  std::strftime(buf, sizeof buf, "%Y%m%d", &tm);
  return buf;
}

void run_comm_card(const CommCardFlags& f) {
  bench::CommCardInput in;
  in.before = read_report(f.before);
  in.after = read_report(f.after);
  in.phase = f.phase;
  in.cell = f.cell;
  if (f.max_share != 0) in.max_share = f.max_share;
  in.topology = f.topology;
  in.id = f.id;
  in.date = utc_date();
  const bench::CommCard card = bench::make_comm_card(in);
  const std::string yaml = bench::comm_card_yaml(card);
  if (!f.out.empty()) {
    std::ofstream out(f.out);
    if (!out || !(out << yaml)) fail("cannot write '{}'", f.out);
  }
  std::fputs(yaml.c_str(), stdout);
  std::fprintf(stderr, "%s\n", bench::comm_card_summary(card).c_str());  // stdout stays pure YAML
}

}  // namespace

void add_bench_comm_card_command(CLI::App& bench) {
  auto f = std::make_shared<CommCardFlags>();
  CLI::App* cmd = bench.add_subcommand(
      "comm-card", "Turn two bench serve reports (before/after a parallel layout change) into a comm budget card");
  cmd->add_option("--before", f->before, "Report of the baseline layout (report.json)")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_option("--after", f->after, "Report of the new layout (report.json)")->required()->check(CLI::ExistingFile);
  cmd->add_option("--phase", f->phase, "Engine step kind to judge: decode, prefill or all")
      ->check(CLI::IsMember({"decode", "prefill", "all"}));
  cmd->add_option("--max-share", f->max_share,
                  "Cap on the after run's communication share (0 or absent: the before spec's "
                  "max_communication_share, else 0.30)")
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--topology", f->topology, "Topology label (default: from the after report's layout)");
  cmd->add_option("--id", f->id, "Card id (default: pcb_<YYYYMMDD>_<hash of the inputs>)");
  cmd->add_option("--cell", f->cell, "Report cell to judge (e.g. c8_h0_all; default: overall)");
  cmd->add_option("-o,--out", f->out, "Also write the card to this file");
  cmd->callback([f] { run_comm_card(*f); });
}

}  // namespace tokenmill::cli
