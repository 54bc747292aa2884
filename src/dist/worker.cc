#include "dist/worker.h"

#include <vector>

#include "util/error.h"
#include "util/thread_pool.h"

namespace tokenmill::dist {

void run_worker(MpiRuntime& runtime, const WorkerConfig& config) {
  ThreadPool pool(config.num_threads);
  std::unique_ptr<model::Model> model = model::Model::load(config.model_path, &runtime, config.rope);
  std::unique_ptr<model::MatmulHook> hook;
  if (config.hook_factory) {
    hook = config.hook_factory(*model);
    model->set_matmul_hook(hook.get());
  }
  const std::vector<model::KvLayerGroup> groups = model->kv_layer_groups(config.window_pool);
  const std::vector<int64_t> blocks = runtime.receive_pool_sizes();
  if (blocks.size() != groups.size())
    fail("rank {}: the root sized {} KV pools, this shard has {} layer groups", runtime.world_rank(), blocks.size(),
         groups.size());
  std::vector<std::unique_ptr<kv::PagedKvStorage>> pools;
  std::vector<kv::PagedKvStorage*> pool_ptrs;
  for (size_t g = 0; g < groups.size(); ++g) {
    pools.push_back(std::make_unique<kv::PagedKvStorage>(
        model->kv_geometry(config.block_size, config.kv_dtype, groups[g].layers), blocks[g]));
    pool_ptrs.push_back(pools.back().get());
  }
  std::vector<float> logits;  // stays empty: only the root gets logits
  while (std::optional<DecodedStep> step = runtime.next_step()) {
    if (step->copies.size() > pools.size()) fail("rank {}: block copies for an unknown pool", runtime.world_rank());
    for (size_t g = 0; g < step->copies.size(); ++g)
      for (const kv::BlockCopy& c : step->copies[g]) pools[g]->copy_block(c.src, c.dst);
    model->forward(step->chunks, pool_ptrs, logits, pool, step->skip_layers);
  }
  model->set_matmul_hook(nullptr);
}

}  // namespace tokenmill::dist
