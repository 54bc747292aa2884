// `tokenmill bench serve SPEC.yaml`: replays the spec's traffic against any
// OpenAI-compatible server and writes report.json, report.md, plots/,
// records.jsonl and plan.jsonl (see src/bench/serve_run.h and
// docs/benchmarks.md).
#include <memory>

#include "bench/serve_run.h"
#include "cli/commands.h"

namespace tokenmill::cli {

void add_bench_serve_command(CLI::App& bench) {
  auto o = std::make_shared<bench::ServeOptions>();
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
  cmd->callback([o] { bench::run_serve_benchmark(*o); });
}

}  // namespace tokenmill::cli
