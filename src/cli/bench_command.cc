// `tokenmill bench ...`: the one place the `bench` command group is created.
// Each benchmark adds itself under it: engine (in-process engine), serve
// (HTTP load generator), compare (optimization tickets), comm-card (parallel
// communication budget cards), and more to come.
#include "cli/commands.h"

namespace tokenmill::cli {

void add_bench_command(CLI::App& app) {
  CLI::App* bench = app.add_subcommand("bench", "Benchmarks: the engine in-process, a server under traffic, tickets");
  bench->require_subcommand(1);
  add_bench_engine_command(app);  // finds the group created above
  add_bench_serve_command(*bench);
  add_bench_compare_command(*bench);
  add_bench_comm_card_command(*bench);
}

}  // namespace tokenmill::cli
