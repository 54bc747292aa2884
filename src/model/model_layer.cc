// One decoder layer over the step's tokens, in the scratch rows: the
// attention block (q, k, v projections, RoPE, K/V into the paged cache,
// attention, output projection) and the FFN block (dense or mixture of
// experts), each added to the residual stream x.
#include <vector>

#include "kernels/ops.h"
#include "kernels/paged_attention.h"
#include "kernels/rope.h"
#include "model/key_channel_scales.h"
#include "model/layer_ops.h"
#include "model/model.h"
#include "model/model_internal.h"
#include "model/moe_expert_parallel.h"
#include "model/moe_ffn.h"
#include "model/rope_config.h"

namespace tokenmill::model {

// x += W_o attention(rope(q), rope(k), v) with q, k, v = W_q, W_k, W_v of
// norm(x); each sequence attends over its positions so far, the earlier
// ones read back from the paged cache.
void Model::attention_block(int64_t layer, std::span<const SequenceChunk> chunks, std::span<const int64_t> positions,
                            std::span<const int64_t> rope_positions, std::span<kv::PagedKvStorage* const> pools,
                            ThreadPool& pool) {
  const KvSlot slot = kv_slot(layer, pools.size());
  kv::PagedKvStorage& kv = *pools[slot.group];
  project_qkv(layer, pool);
  rotate_qk(layer, rope_positions, pool);
  scale_keys(layer, kv.geometry().dtype);
  write_kv_and_attend(layer, chunks, positions, kv, slot, pool);
  attention_output(layer, pool);
}

void Model::project_qkv(int64_t layer, ThreadPool& pool) {
  const ModelConfig& c = local_;  // this rank's heads
  const LayerWeights& w = weights_.layers[static_cast<size_t>(layer)];
  Scratch& s = *scratch_;
  const int64_t T = s.num_tokens;
  // q, k, v = projections of the (normalised) residual stream.
  const float* in = block_input(s.x.data(), w.attn_norm, s.xb.data(), T, c.n_embd, c.rms_eps);
  layer_matmul(layer, LoraSlot::kQ, w.wq, in, s.q.data(), pool);
  layer_matmul(layer, LoraSlot::kK, w.wk, in, s.k.data(), pool);
  layer_matmul(layer, LoraSlot::kV, w.wv, in, s.v.data(), pool);
  add_bias(s.q.data(), w.bq, T);
  add_bias(s.k.data(), w.bk, T);
  add_bias(s.v.data(), w.bv, T);
  // q/k norms span their weight's length: one head, or (olmo2) the whole
  // projection, which tensor parallelism refuses (resolve_shard).
  if (w.q_norm.present())
    norm_rows(s.q.data(), w.q_norm, s.q.data(), T * c.n_q_dim() / w.q_norm.size, w.q_norm.size, c.rms_eps);
  if (w.k_norm.present())
    norm_rows(s.k.data(), w.k_norm, s.k.data(), T * c.n_kv_dim() / w.k_norm.size, w.k_norm.size, c.rms_eps);
}

void Model::rotate_qk(int64_t layer, std::span<const int64_t> rope_positions, ThreadPool& pool) {
  const ModelConfig& c = local_;
  Scratch& s = *scratch_;
  const int64_t hd = c.head_dim;
  // Rotary position embedding, per head, at each token's own position. The
  // pairs' frequencies once per layer, the angles once per token, shared by
  // its heads.
  const kernels::RopeFrequencies freqs = layer_rope(layer);
  pool.parallel_for(s.num_tokens, [&](int, int64_t first, int64_t last) {
    std::vector<double> cos_t(static_cast<size_t>(c.rope_dims / 2)), sin_t(cos_t.size());
    for (int64_t i = first; i < last; ++i) {
      kernels::rope_angles(freqs, rope_positions[static_cast<size_t>(i)], cos_t.data(), sin_t.data());
      for (int64_t h = 0; h < c.n_head; ++h)
        kernels::rope_apply(s.q.data() + (i * c.n_head + h) * hd, c.rope_dims, cos_t.data(), sin_t.data(), c.rope_neox);
      for (int64_t h = 0; h < c.n_kv_head; ++h)
        kernels::rope_apply(s.k.data() + (i * c.n_kv_head + h) * hd, c.rope_dims, cos_t.data(), sin_t.data(),
                            c.rope_neox);
    }
  });
}

void Model::scale_keys(int64_t layer, kv::KvDtype dtype) {
  const ModelConfig& c = local_;
  Scratch& s = *scratch_;
  // q4_0_kc: keys divided by their channels' scales, queries multiplied
  // (model/key_channel_scales.h); while those are measured, the keys'
  // magnitudes go to them.
  const KeyHeads key_heads{c.n_head, c.n_kv_head, c.head_dim, c.rope_dims, c.rope_neox};
  const int64_t local_layer = layer - shard_.layer_begin;
  if (key_magnitudes_ != nullptr)
    accumulate_key_magnitudes(s.k.data(), s.num_tokens, key_heads,
                              key_magnitudes_->data() + local_layer * c.n_kv_dim());
  if (kv::kv_keys_channel_scaled(dtype))
    apply_key_scales(s.q.data(), s.k.data(), s.num_tokens, key_heads,
                     std::span<const float>(key_scales_)
                         .subspan(static_cast<size_t>(local_layer * c.n_kv_dim()), static_cast<size_t>(c.n_kv_dim())));
}

void Model::write_kv_and_attend(int64_t layer, std::span<const SequenceChunk> chunks,
                                std::span<const int64_t> positions, kv::PagedKvStorage& kv, KvSlot slot,
                                ThreadPool& pool) {
  const ModelConfig& c = local_;
  Scratch& s = *scratch_;
  const bool local = c.layer_is_local[static_cast<size_t>(layer)];
  // Write each sequence's new K/V into its blocks, then attend over all its
  // positions so far (read back through the same block table).
  const kernels::AttentionShape shape{
      c.n_head, c.n_kv_head, c.head_dim, c.attn_scale, local ? c.sliding_window : 0, c.attn_softcap};
  const kernels::PagedKv cache = layer_kv(kv, slot.pool_layer);
  int64_t t0 = 0;
  for (const SequenceChunk& ch : chunks) {
    const int64_t n = static_cast<int64_t>(ch.tokens.size());
    const ChunkTable& table = ch.tables[slot.group];
    kernels::paged_kv_write(cache, table.blocks, ch.start_pos, n, s.k.data() + t0 * c.n_kv_dim(),
                            s.v.data() + t0 * c.n_kv_dim(), table.first);
    // A sliding-window layer's mass would only ever favour its window.
    kernels::paged_attention(shape, s.q.data() + t0 * c.n_q_dim(), positions.data() + t0, n, cache, table.blocks,
                             ch.start_pos + n, s.att.data() + t0 * c.n_q_dim(), pool, table.first,
                             local ? nullptr : ch.key_mass);
    t0 += n;
  }
}

void Model::attention_output(int64_t layer, ThreadPool& pool) {
  const ModelConfig& c = local_;
  const LayerWeights& w = weights_.layers[static_cast<size_t>(layer)];
  Scratch& s = *scratch_;
  const int64_t T = s.num_tokens;
  // Output projection (gemma3, olmo2: normalised again; granite: scaled)
  // added to the residual stream; with tensor parallelism each rank's heads
  // give a partial sum.
  layer_matmul(layer, LoraSlot::kO, w.wo, s.att.data(), s.xb.data(), pool);
  if (shard_.tp_size > 1) comm_->tp_all_reduce_sum(s.xb.data(), T * c.n_embd);
  if (w.post_attn_norm.present()) norm_rows(s.xb.data(), w.post_attn_norm, s.xb.data(), T, c.n_embd, c.rms_eps);
  add_residual(s.x.data(), s.xb.data(), c.residual_scale, T * c.n_embd);
}

kernels::RopeFrequencies Model::layer_rope(int64_t layer) const {
  const ModelConfig& c = local_;
  const bool local = c.layer_is_local[static_cast<size_t>(layer)];
  // The pairs' frequencies (scaling included: linear, llama3 factors, YaRN).
  const float* factors = c.rope_scaling != RopeScalingType::kLongRope ? weights_.rope_freqs.data
                         : rope_long_factors(c)                       ? weights_.rope_factors_long.data
                                                                      : weights_.rope_factors_short.data;
  return kernels::rope_frequencies(c.rope_dims, local ? c.rope_base_local : c.rope_base, rope_scaling_params(c, local),
                                   factors);
}

void Model::ffn_block(int64_t layer, ThreadPool& pool) {
  const ModelConfig& c = local_;  // this rank's FFN columns
  const LayerWeights& w = weights_.layers[static_cast<size_t>(layer)];
  Scratch& s = *scratch_;
  const int64_t T = s.num_tokens;
  if (c.is_moe()) {
    // Router, experts and shared expert (model/moe_ffn.h); the LoRA slots
    // and matmul hooks do not reach the experts.
    const float* in = block_input(s.x.data(), w.ffn_norm, s.xb.data(), T, c.n_embd, c.rms_eps);
    const std::span<int64_t> load(expert_load_.data() + (layer - shard_.layer_begin) * c.n_expert,
                                  static_cast<size_t>(c.n_expert));
    if (shard_.expert_parallel()) {
      moe_ffn_expert_parallel(w, c, shard_, *comm_, in, T, s.xb.data(), expert_compute_, s.moe, s.expert_parallel, pool,
                              load);
    } else {
      moe_ffn(w, c, in, T, s.xb.data(), expert_compute_, s.moe, pool, load);
    }
    finish_ffn(w);
    return;
  }

  // down( act(gate(x)) * up(x) ), with the extra norm after it (gemma3,
  // olmo2) and granite's residual multiplier.
  const float* in = block_input(s.x.data(), w.ffn_norm, s.xb.data(), T, c.n_embd, c.rms_eps);
  layer_matmul(layer, LoraSlot::kGate, w.w_gate, in, s.gate.data(), pool);
  layer_matmul(layer, LoraSlot::kUp, w.w_up, in, s.up.data(), pool);
  if (c.ffn_gelu) {
    kernels::geglu_tanh(s.gate.data(), s.up.data(), T * c.n_ff);
  } else {
    kernels::swiglu(s.gate.data(), s.up.data(), T * c.n_ff);
  }
  layer_matmul(layer, LoraSlot::kDown, w.w_down, s.gate.data(), s.xb.data(), pool);
  finish_ffn(w);
}

void Model::finish_ffn(const LayerWeights& w) {
  const ModelConfig& c = local_;
  Scratch& s = *scratch_;
  const int64_t T = s.num_tokens;
  // Expert parallel: the rows were gathered whole (moe_expert_parallel.h).
  if (shard_.tp_size > 1 && !(c.is_moe() && shard_.expert_parallel()))
    comm_->tp_all_reduce_sum(s.xb.data(), T * c.n_embd);
  if (w.post_ffn_norm.present()) norm_rows(s.xb.data(), w.post_ffn_norm, s.xb.data(), T, c.n_embd, c.rms_eps);
  add_residual(s.x.data(), s.xb.data(), c.residual_scale, T * c.n_embd);
}

}  // namespace tokenmill::model
