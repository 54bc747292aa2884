#include "cli/parallel_launch.h"

#include "cli/stop_signals.h"
#include "dist/worker.h"
#include "util/error.h"

namespace tokenmill::cli {

void add_parallel_flags(CLI::App& cmd, ParallelFlags& f) {
  cmd.add_option("--tp", f.tp, "Tensor-parallel ranks (under mpirun; heads, FFN and vocabulary split)")
      ->capture_default_str();
  cmd.add_option("--pp", f.pp, "Pipeline-parallel stages (under mpirun; layers split)")->capture_default_str();
  cmd.add_option("--ep", f.ep,
                 "Expert-parallel ranks (under mpirun; mixture-of-experts models: each rank holds a share of the "
                 "experts; attention split with --tp of the same count, else replicated)")
      ->capture_default_str();
  cmd.add_option("--pp-microbatches", f.microbatches, "Micro-batches a pipelined step is cut into (0: one per stage)")
      ->capture_default_str();
}

std::shared_ptr<dist::MpiRuntime> start_parallel(const ParallelFlags& f) {
  if (f.tp < 1 || f.tp > 1024) fail("--tp must be in [1, 1024], got {}", f.tp);
  if (f.pp < 1 || f.pp > 1024) fail("--pp must be in [1, 1024], got {}", f.pp);
  if (f.ep < 1 || f.ep > 1024) fail("--ep must be in [1, 1024], got {}", f.ep);
  if (f.microbatches < 0 || f.microbatches > 1024)
    fail("--pp-microbatches must be in [0, 1024], got {}", f.microbatches);
  if (f.tp * f.pp * f.ep == 1 && !dist::launched_by_mpirun()) return nullptr;
  return dist::MpiRuntime::start(f.tp, f.pp, f.microbatches > 0 ? f.microbatches : f.pp, f.ep);
}

bool run_if_worker(const std::shared_ptr<dist::MpiRuntime>& runtime, engine::EngineConfig& config) {
  if (runtime == nullptr) return false;
  if (runtime->world_size() == 1) return false;  // mpirun -np 1: one plain process
  if (runtime->is_root()) {
    config.parallel = runtime;
    return false;
  }
  block_stop_signals();  // never waited on: rank 0 stops the workers
  dist::WorkerConfig w;
  w.model_path = config.model_path;
  w.num_threads = config.num_threads;
  w.block_size = config.block_size;
  w.kv_dtype = config.kv_dtype;
  w.window_pool = config.kv_window_pool;
  w.rope = config.rope;
  w.hook_factory = config.matmul_hook_factory;
  dist::run_worker(*runtime, w);
  return true;
}

}  // namespace tokenmill::cli
