// `tokenmill bench serve SPEC.yaml`: replays the spec's traffic against any
// OpenAI-compatible server and writes report.json, report.md, plots/,
// records.jsonl and plan.jsonl (see src/bench/serve_run.h and
// docs/benchmarks.md). With --find-capacity it searches for the highest load
// that meets the spec's SLOs instead (src/bench/capacity_run.h).
#include <memory>

#include "bench/capacity_run.h"
#include "bench/serve_run.h"
#include "cli/commands.h"

namespace tokenmill::cli {

void add_bench_serve_command(CLI::App& bench) {
  auto o = std::make_shared<bench::ServeOptions>();
  auto cap = std::make_shared<bench::CapacityOptions>();
  auto find_capacity = std::make_shared<bool>(false);
  CLI::App* cmd = bench.add_subcommand("serve", "Load-test an OpenAI-compatible server with a traffic spec");
  cmd->add_option("spec", o->spec_path, "Traffic spec (YAML)")->required()->check(CLI::ExistingFile);
  cmd->add_option("--url", o->url, "Server base URL (default: the spec's target.url)");
  cmd->add_option("-o,--out", o->out_dir, "Output directory")->capture_default_str();
  cmd->add_option("--set", o->overrides, "Override a spec key, e.g. --set traffic.requests_per_cell=20 (repeatable)")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd->add_option("--tokenizer", o->tokenizer_gguf, "Count prompt tokens with this GGUF's tokenizer")
      ->check(CLI::ExistingFile);
  cmd->add_option("--server-pid", o->server_pid, "The server's pid, to sample its RSS from /proc (same host)");
  cmd->add_flag("--dry-run", o->dry_run, "Write plan.jsonl (the exact requests) and stop");
  cmd->add_flag("!--no-plots", o->plots, "Skip the gnuplot plots");
  cmd->add_flag("--find-capacity", *find_capacity,
                "Search the highest rate (open loop) or concurrency (closed loop) that meets the spec's SLOs");
  cmd->add_option("--capacity-percentile", cap->percentile, "Percentile at which every SLO must hold")
      ->capture_default_str();
  cmd->add_option("--min-goodput", cap->min_goodput, "Least share of requests ok and within SLO for a step to meet")
      ->capture_default_str();
  cmd->add_option("--capacity-requests", cap->requests, "Requests per step (0: the spec's traffic.requests_per_cell)")
      ->capture_default_str();
  cmd->add_option("--capacity-precision", cap->precision, "Stop when the knee is bracketed this tightly (relative)")
      ->capture_default_str();
  cmd->add_option("--capacity-max-steps", cap->max_steps, "Most steps to run")->capture_default_str();
  cmd->add_option("--capacity-start", cap->start, "First load (0: traffic.rate, or the first traffic.concurrency)")
      ->capture_default_str();
  cmd->add_option("--capacity-clients", cap->clients,
                  "Open loop: client connections per step (0: the largest traffic.concurrency)")
      ->capture_default_str();
  cmd->callback([o, cap, find_capacity] {
    if (*find_capacity) {
      bench::run_capacity_search(*o, *cap);
    } else {
      bench::run_serve_benchmark(*o);
    }
  });
}

}  // namespace tokenmill::cli
