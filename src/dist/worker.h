// What every rank but the root runs (`mpirun -np N tokenmill serve --tp
// ...`): its shard of the model and of the KV pools, and a loop that runs
// each forward pass the root announces until the root stops.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "dist/mpi_runtime.h"
#include "kv/kv_dtype.h"
#include "model/matmul_hook.h"
#include "model/model.h"

namespace tokenmill::dist {

// The engine settings a worker must share with the root (the rest of the
// engine lives on the root only).
struct WorkerConfig {
  std::string model_path;
  int num_threads = 0;
  int64_t block_size = 16;
  kv::KvDtype kv_dtype = kv::KvDtype::F16;
  bool window_pool = true;
  model::RopeOverrides rope;  // the root's, so that every rank rotates alike
  // The weight runtime's hook for the model shard (null result: none).
  std::function<std::unique_ptr<model::MatmulHook>(const model::Model&)> hook_factory;
};

// Loads the shard, allocates the pools the root sized, then runs forward
// passes until the root stops. Throws Error for a bad model or message
// (the caller then ends the whole run: abort_parallel_run).
void run_worker(MpiRuntime& runtime, const WorkerConfig& config);

}  // namespace tokenmill::dist
