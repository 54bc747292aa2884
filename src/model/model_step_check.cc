// The checks a step passes before forward() runs it: the pools against the
// model's KV layer groups, and each chunk's tokens, positions and block
// tables against the pools (Error for anything a caller can get wrong).
#include <algorithm>
#include <vector>

#include "model/model.h"
#include "util/error.h"

namespace tokenmill::model {
namespace {

void check_geometry(const kv::PagedKvStorage& kv, int64_t n_layer, int64_t n_kv_dim, const char* what) {
  const kv::KvGeometry& g = kv.geometry();
  if (g.n_layer != n_layer || g.n_kv_dim != n_kv_dim)
    fail("forward: the {}KV pool has {} layers of {} K/V dims, the model needs {} of {}", what, g.n_layer, g.n_kv_dim,
         n_layer, n_kv_dim);
}

// A table holding logical blocks [first, first + table.size()) must reach
// position end - 1 with ids inside the pool.
void check_table(std::span<const int32_t> table, int64_t first, int64_t end, const kv::PagedKvStorage& kv) {
  const int64_t bs = kv.block_size();
  const int64_t needed = (end + bs - 1) / bs - first;
  if (static_cast<int64_t>(table.size()) < needed)
    fail("forward: positions [{}, {}) need {} blocks of {}, the block table has {}", first * bs, end, needed, bs,
         table.size());
  for (int64_t b = 0; b < needed; ++b) {
    const int32_t id = table[static_cast<size_t>(b)];
    if (id < 0 || id >= kv.num_blocks()) fail("forward: block id {} is outside the pool [0, {})", id, kv.num_blocks());
  }
}

void validate_step(const ModelConfig& c, std::span<const SequenceChunk> chunks,
                   std::span<kv::PagedKvStorage* const> pools, std::span<const KvLayerGroup> groups,
                   std::span<const kv::KvGeometry> geometries) {
  if (pools.size() != groups.size())
    fail("forward: {} KV pools given, the model's layer groups need {}", pools.size(), groups.size());
  for (size_t g = 0; g < pools.size(); ++g) {
    if (pools[g] == nullptr) fail("forward: no KV pool for layer group {}", g);
    check_geometry(*pools[g], geometries[g].n_layer, c.n_kv_dim(),
                   groups[g].layers == KvGroup::kAll ? ""
                   : groups[g].window > 0            ? "sliding-window "
                                                     : "full-attention ");
    if (pools[g]->block_size() != pools[0]->block_size()) fail("forward: the KV pools differ in block size");
  }
  for (const SequenceChunk& ch : chunks) {
    if (ch.tokens.empty()) fail("forward: empty chunk");
    if (ch.start_pos < 0) fail("forward: chunk starts at negative position {}", ch.start_pos);
    for (int32_t t : ch.tokens) {
      if (t < 0 || t >= c.n_vocab) fail("token id {} is outside the vocabulary [0, {})", t, c.n_vocab);
    }
    if (ch.tables.size() != pools.size())
      fail("forward: a chunk has {} block tables for {} KV pools", ch.tables.size(), pools.size());
    const int64_t end = ch.start_pos + static_cast<int64_t>(ch.tokens.size());
    for (size_t g = 0; g < pools.size(); ++g) {
      const ChunkTable& t = ch.tables[g];
      const int64_t window = groups[g].window;
      const int64_t first_visible = window > 0 ? std::max<int64_t>(0, ch.start_pos - window + 1) : 0;
      if (t.first < 0 || t.first * pools[g]->block_size() > first_visible)
        fail("forward: the block table of layer group {} starts at block {}, position {} needs position {}", g, t.first,
             ch.start_pos, first_visible);
      check_table(t.blocks, t.first, end, *pools[g]);
    }
  }
}

}  // namespace

void Model::check_step(std::span<const SequenceChunk> chunks, std::span<kv::PagedKvStorage* const> pools,
                       std::span<const uint8_t> skip_layers) const {
  if (!skip_layers.empty() && static_cast<int64_t>(skip_layers.size()) != config_.n_layer)
    fail("forward: {} layer skip flags for a model of {} layers", skip_layers.size(), config_.n_layer);
  if (pools.size() == 2 && !has_window_group())
    fail("forward: a second KV pool needs sliding-window and full-attention layers");
  const std::vector<KvLayerGroup> groups = kv_layer_groups(pools.size() == 2);
  const int64_t bs = !pools.empty() && pools[0] != nullptr ? pools[0]->block_size() : 1;
  std::vector<kv::KvGeometry> geometries;
  for (const KvLayerGroup& g : groups) geometries.push_back(kv_geometry(bs, kv::KvDtype::F16, g.layers));
  validate_step(local_, chunks, pools, groups, geometries);
  for (const SequenceChunk& ch : chunks) {
    if (ch.adapter != nullptr && ch.adapter->base() != this)
      fail("forward: a chunk's LoRA adapter is for another model");
    if (ch.key_mass != nullptr && comm_ != nullptr)
      fail("forward: attention mass (the h2o KV policy) is not available with tensor or pipeline parallelism");
  }
}

}  // namespace tokenmill::model
