// Tensor, pipeline and expert parallelism from the command line: `mpirun
// -np N tokenmill serve --tp A --pp B ...` (N = A x B), or `--ep E [--tp
// E]` (N = E: the experts spread over E ranks). Every rank parses the same
// flags; rank 0 goes on to build the engine (and the server), the others
// become workers (dist/worker.h) that run their shard of each forward pass
// until rank 0 stops.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <memory>

#include "dist/mpi_runtime.h"
#include "engine/engine_config.h"

namespace tokenmill::cli {

struct ParallelFlags {
  int tp = 1;
  int pp = 1;
  int ep = 1;                // expert parallel ranks (mixture-of-experts models; model/parallel.h)
  int64_t microbatches = 0;  // 0: one per stage
};
void add_parallel_flags(CLI::App& cmd, ParallelFlags& flags);

// Starts MPI when the flags ask for more than one rank or mpirun started
// this process; null for one plain process. Throws Error for a layout the
// ranks cannot make.
std::shared_ptr<dist::MpiRuntime> start_parallel(const ParallelFlags& flags);

// On a rank other than 0: runs the worker with the engine settings it
// shares with rank 0 until rank 0 stops, and returns true (the caller then
// returns). SIGINT and SIGTERM are ignored there: rank 0 drains and stops
// the workers. On rank 0 (or with no runtime): returns false and hands the
// runtime to the engine (config.parallel).
bool run_if_worker(const std::shared_ptr<dist::MpiRuntime>& runtime, engine::EngineConfig& config);

}  // namespace tokenmill::cli
