// tokenmill: one binary, one subcommand per job.
#include <cstdio>
#include <exception>

#include "cli/commands.h"
#include "dist/mpi_runtime.h"
#include "util/error.h"

int main(int argc, char** argv) {
  CLI::App app{"tokenmill: a self-hosted LLM inference engine, server and benchmark"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "tokenmill 0.1.0");
  // Subcommands are added here as each one lands; every one lives in its own file.
  tokenmill::cli::add_tokenize_command(app);
  tokenmill::cli::add_template_command(app);
  tokenmill::cli::add_grammar_command(app);
  tokenmill::cli::add_inspect_command(app);
  tokenmill::cli::add_synth_command(app);
  tokenmill::cli::add_synth_lora_command(app);
  tokenmill::cli::add_convert_command(app);
  tokenmill::cli::add_run_command(app);
  tokenmill::cli::add_logits_command(app);
  tokenmill::cli::add_quantize_command(app);
  tokenmill::cli::add_calibrate_command(app);
  tokenmill::cli::add_eval_command(app);
  tokenmill::cli::add_bench_command(app);        // bench engine|serve|compare
  tokenmill::cli::add_bench_model_command(app);  // bench model (after the group exists)
  tokenmill::cli::add_serve_command(app);
  tokenmill::cli::add_route_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const tokenmill::Error& e) {
    std::fprintf(stderr, "tokenmill: error: %s\n", e.what());
    tokenmill::dist::abort_parallel_run(1);  // under mpirun: the other ranks would wait forever
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tokenmill: internal error: %s\n", e.what());
    tokenmill::dist::abort_parallel_run(2);
    return 2;
  }
  return 0;
}
