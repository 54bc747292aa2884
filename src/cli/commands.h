// One function per subcommand: each adds its CLI11 subcommand to the app and
// sets the callback that runs it. Callbacks throw tokenmill::Error for bad
// input; main() prints it and exits non-zero.
#pragma once

#include <CLI/CLI.hpp>

namespace tokenmill::cli {

void add_inspect_command(CLI::App& app);
void add_tokenize_command(CLI::App& app);
void add_template_command(CLI::App& app);  // `template`: render a chat template
void add_grammar_command(CLI::App& app);
void add_run_command(CLI::App& app);
void add_convert_command(CLI::App& app);
void add_synth_command(CLI::App& app);
void add_synth_lora_command(CLI::App& app);
void add_logits_command(CLI::App& app);
void add_quantize_command(CLI::App& app);
void add_calibrate_command(CLI::App& app);
void add_eval_command(CLI::App& app);          // `eval ppl|kld|tasks|bench`
void add_bench_engine_command(CLI::App& app);  // `bench engine`; creates `bench` if absent
// `bench` group (bench_command.cc): creates it once and adds every benchmark.
void add_bench_command(CLI::App& app);
void add_bench_serve_command(CLI::App& bench);      // `bench serve`
void add_bench_compare_command(CLI::App& bench);    // `bench compare`
void add_bench_comm_card_command(CLI::App& bench);  // `bench comm-card`
void add_bench_model_command(CLI::App& app);        // `bench model`; creates `bench` if absent
void add_serve_command(CLI::App& app);
void add_route_command(CLI::App& app);  // `route`: replicas behind a prefix-aware router

}  // namespace tokenmill::cli
