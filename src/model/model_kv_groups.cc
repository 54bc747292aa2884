// The KV layer groups: which layers' K/V each pool given to forward() holds
// (every layer, or the full-attention and the sliding-window layers apart),
// the pool geometry each group needs, and where a layer lives in them.
#include <algorithm>

#include "model/model.h"
#include "util/check.h"
#include "util/error.h"

namespace tokenmill::model {
namespace {

// Sliding-window layers among [begin, end).
int64_t num_local_layers(const ModelConfig& c, int64_t begin, int64_t end) {
  return std::count(c.layer_is_local.begin() + begin, c.layer_is_local.begin() + end, true);
}

}  // namespace

bool Model::has_window_group() const {
  // The whole model decides (every rank of a pipeline keeps the same pools).
  const int64_t local = num_local_layers(config_, 0, config_.n_layer);
  return config_.sliding_window > 0 && local > 0 && local < config_.n_layer;
}

std::vector<KvLayerGroup> Model::kv_layer_groups(bool window_pool) const {
  if (!window_pool || !has_window_group()) return {{KvGroup::kAll, 0}};
  return {{KvGroup::kFull, 0}, {KvGroup::kWindow, config_.sliding_window}};
}

kv::KvGeometry Model::kv_geometry(int64_t block_size, kv::KvDtype dtype, KvGroup group) const {
  TM_CHECK(group == KvGroup::kAll || has_window_group());
  kv::KvGeometry g;
  const int64_t stage_layers = shard_.layer_end - shard_.layer_begin;
  const int64_t local = num_local_layers(config_, shard_.layer_begin, shard_.layer_end);
  g.n_layer = group == KvGroup::kAll ? stage_layers : group == KvGroup::kWindow ? local : stage_layers - local;
  if (g.n_layer == 0)
    fail("pipeline stage {} (layers {}..{}) has no {} layer: run it with one KV pool (--no-window-pool)",
         shard_.pp_stage, shard_.layer_begin, shard_.layer_end - 1,
         group == KvGroup::kWindow ? "sliding-window" : "full-attention");
  g.n_kv_dim = local_.n_kv_dim();
  g.block_size = block_size;
  g.dtype = dtype;
  return g;
}

Model::KvSlot Model::kv_slot(int64_t layer, size_t num_pools) const {
  // Two pools: a local layer lives in the second (window) pool, at its
  // index among the local layers, and is read through the second table.
  const bool local = local_.layer_is_local[static_cast<size_t>(layer)];
  const size_t group = num_pools == 2 && local ? 1 : 0;
  const int64_t pool_layer = num_pools == 2 ? group_layer_[static_cast<size_t>(layer)] : layer - shard_.layer_begin;
  return KvSlot{group, pool_layer};
}

}  // namespace tokenmill::model
