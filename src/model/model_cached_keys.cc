// Work on the keys already in the KV cache, outside a step's forward pass:
// re-rotating them when a KV policy moves their positions, and measuring the
// per-channel key scales of the q4_0_kc cache.
#include <algorithm>
#include <vector>

#include "kernels/paged_attention.h"
#include "kernels/rope.h"
#include "model/key_channel_scales.h"
#include "model/model.h"
#include "model/model_internal.h"
#include "util/error.h"

namespace tokenmill::model {

void Model::shift_keys(std::span<kv::PagedKvStorage* const> pools, std::span<const std::vector<kv::KeyShift>> shifts,
                       ThreadPool& pool) {
  if (comm_ != nullptr) fail("re-rotating cached keys is not supported with tensor or pipeline parallelism");
  if (shifts.size() > pools.size()) fail("shift_keys: shifts for {} pools, {} given", shifts.size(), pools.size());
  const ModelConfig& c = local_;
  for (int64_t layer = shard_.layer_begin; layer < shard_.layer_end; ++layer) {
    const KvSlot slot = kv_slot(layer, pools.size());
    if (slot.group >= shifts.size() || shifts[slot.group].empty()) continue;
    const kernels::PagedKv cache = layer_kv(*pools[slot.group], slot.pool_layer);
    // The rotation by delta is the position's own: mscale (YaRN) stays
    // out, the key already carries it once.
    kernels::RopeFrequencies freqs = layer_rope(layer);
    freqs.mscale = 1.0;
    const std::vector<kv::KeyShift>& list = shifts[slot.group];
    pool.parallel_for(static_cast<int64_t>(list.size()), [&](int, int64_t first, int64_t last) {
      std::vector<double> cos_d(static_cast<size_t>(c.rope_dims / 2)), sin_d(cos_d.size());
      for (int64_t i = first; i < last; ++i) {
        const kv::KeyShift& shift = list[static_cast<size_t>(i)];
        kernels::rope_angles(freqs, shift.delta, cos_d.data(), sin_d.data());
        kernels::paged_key_rotate(cache, shift.block, c.head_dim, c.rope_dims, cos_d.data(), sin_d.data(), c.rope_neox);
      }
    });
  }
}

void Model::prepare_key_scales(ThreadPool& pool) {
  if (!key_scales_.empty()) return;
  if (comm_ != nullptr)
    fail(
        "--kv-dtype q4_0_kc is not supported with tensor or pipeline parallelism (its key scales are measured in one "
        "process)");
  const ModelConfig& c = local_;
  const std::vector<int32_t> tokens = key_calibration_tokens(file_, c.n_vocab, std::min<int64_t>(c.n_ctx_train, 512));
  constexpr int64_t kBlock = 16;
  const int64_t n = static_cast<int64_t>(tokens.size());
  kv::PagedKvStorage storage(kv_geometry(kBlock, kv::KvDtype::F32), (n + kBlock - 1) / kBlock);
  std::vector<int32_t> blocks(static_cast<size_t>(storage.num_blocks()));
  for (size_t b = 0; b < blocks.size(); ++b) blocks[b] = static_cast<int32_t>(b);
  const ChunkTable table{blocks, 0};
  SequenceChunk chunk;
  chunk.tokens = tokens;
  chunk.tables = {&table, 1};
  chunk.logits = LogitRows::kNone;
  const int64_t layers = shard_.layer_end - shard_.layer_begin;
  std::vector<float> magnitudes(static_cast<size_t>(layers * c.n_kv_dim()), 0.0f);
  std::vector<float> logits;
  key_magnitudes_ = &magnitudes;
  try {
    forward({&chunk, 1}, storage, logits, pool);
  } catch (...) {
    key_magnitudes_ = nullptr;
    throw;
  }
  key_magnitudes_ = nullptr;
  // Heads are independent and every layer's row is whole heads, so all
  // layers go through at once.
  key_scales_ = key_scales_from_magnitudes(magnitudes, c.head_dim);
}

}  // namespace tokenmill::model
