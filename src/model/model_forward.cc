// The forward pass of one step: the chunks' tokens as one flat batch through
// this stage's layers (model_layer.cc), then the final norm and the output
// projection of the rows that need logits. With a pipeline, the step runs
// as micro-batches that the stages pass on.
#include <algorithm>
#include <vector>

#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "model/layer_ops.h"
#include "model/lora_apply.h"
#include "model/microbatch.h"
#include "model/model.h"
#include "model/model_internal.h"
#include "model/shard.h"
#include "util/error.h"

namespace tokenmill::model {
namespace {

// The flat batch's cache positions (what attention masks by) and RoPE
// positions (what the rotations use), [T] each: the same unless a KV policy
// evicted before the chunk.
void chunk_positions(std::span<const SequenceChunk> chunks, std::span<int64_t> positions,
                     std::span<int64_t> rope_positions) {
  size_t t = 0;
  for (const SequenceChunk& ch : chunks) {
    for (size_t i = 0; i < ch.tokens.size(); ++i, ++t) {
      positions[t] = ch.start_pos + static_cast<int64_t>(i);
      rope_positions[t] = positions[t] + ch.rope_offset;
    }
  }
}

}  // namespace

void Model::forward(std::span<const SequenceChunk> chunks, std::span<kv::PagedKvStorage* const> pools,
                    std::vector<float>& logits, ThreadPool& pool, std::span<const uint8_t> skip_layers,
                    std::vector<float>* hidden) {
  check_step(chunks, pools, skip_layers);
  std::fill(expert_load_.begin(), expert_load_.end(), 0);
  for (const kv::PagedKvStorage* p : pools)
    if (kv::kv_keys_channel_scaled(p->geometry().dtype)) prepare_key_scales(pool);
  const int64_t V = config_.n_vocab;
  int64_t R = 0;
  int64_t H = 0;
  for (const SequenceChunk& ch : chunks) {
    R += num_logit_rows(ch);
    H += num_hidden_rows(ch);
  }
  const bool root = comm_ == nullptr || comm_->is_root();
  logits.resize(static_cast<size_t>(root ? R * V : 0));
  if (hidden != nullptr) {
    if (H > 0 && shard_.pp_size > 1) fail("forward: hidden states are not available with pipeline parallelism");
    hidden->resize(static_cast<size_t>(root ? H * config_.n_embd : 0));
  }
  if (shard_.pp_size == 1) {
    forward_part(chunks, pools, pool, skip_layers, logits.data(), 0,
                 hidden != nullptr && H > 0 && root ? hidden->data() : nullptr);
    if (comm_ != nullptr) comm_->wait_sends();
    return;
  }
  // Pipeline: the stages work on consecutive micro-batches at once; the
  // root (stage 0) gets each one's logits back from the last stage.
  const std::vector<std::vector<SequenceChunk>> parts = split_microbatches(chunks, shard_.microbatches);
  for (size_t m = 0; m < parts.size(); ++m)
    forward_part(parts[m], pools, pool, skip_layers, nullptr, static_cast<int>(m));
  if (root) {
    int64_t row = 0;
    for (size_t m = 0; m < parts.size(); ++m) {
      int64_t rows = 0;
      for (const SequenceChunk& ch : parts[m]) rows += num_logit_rows(ch);
      if (rows > 0) comm_->recv_logits(logits.data() + row * V, rows * V, static_cast<int>(m));
      row += rows;
    }
  }
  comm_->wait_sends();
}

void Model::forward_part(std::span<const SequenceChunk> chunks, std::span<kv::PagedKvStorage* const> pools,
                         ThreadPool& pool, std::span<const uint8_t> skip_layers, float* logits, int tag,
                         float* hidden) {
  const ModelConfig& c = local_;
  Scratch& s = *scratch_;
  int64_t T = 0;
  int64_t R = 0;
  for (const SequenceChunk& ch : chunks) {
    T += static_cast<int64_t>(ch.tokens.size());
    R += num_logit_rows(ch);
  }
  reserve_scratch(chunks, T);
  std::vector<int64_t> positions(static_cast<size_t>(T)), rope_positions(static_cast<size_t>(T));
  chunk_positions(chunks, positions, rope_positions);

  // The first stage starts the residual stream from the embeddings, the
  // others receive it from the stage before.
  if (shard_.first_stage()) {
    embed_tokens(chunks);
  } else {
    comm_->recv_prev(s.x.data(), T * c.n_embd, tag);
  }
  for (int64_t layer = shard_.layer_begin; layer < shard_.layer_end; ++layer) {
    if (!skip_layers.empty() && skip_layers[static_cast<size_t>(layer)] != 0) continue;
    attention_block(layer, chunks, positions, rope_positions, pools, pool);
    ffn_block(layer, pool);
  }
  if (!shard_.last_stage()) {
    comm_->send_next(s.x.data(), T * c.n_embd, tag);
    return;
  }
  if (hidden != nullptr) write_hidden_rows(chunks, hidden);
  if (R == 0) return;
  // Expert parallel with replicated attention: the other ranks' logits
  // would be the root's; nobody reads them.
  if (logits == nullptr && shard_.pp_size == 1 && shard_.tp_size == 1) return;
  final_norm_rows(chunks, R);
  project_logits(R, logits, tag, pool);
}

void Model::reserve_scratch(std::span<const SequenceChunk> chunks, int64_t T) {
  const ModelConfig& c = local_;
  Scratch& s = *scratch_;
  s.num_tokens = T;
  s.lora_tokens = lora_token_rows(chunks);
  s.lora_logits = lora_logit_rows(chunks);
  grow_scratch(s.x, T * c.n_embd);
  grow_scratch(s.xb, T * c.n_embd);
  grow_scratch(s.q, T * c.n_q_dim());
  grow_scratch(s.k, T * c.n_kv_dim());
  grow_scratch(s.v, T * c.n_kv_dim());
  grow_scratch(s.att, T * c.n_q_dim());
  grow_scratch(s.gate, T * c.n_ff);
  grow_scratch(s.up, T * c.n_ff);
}

void Model::embed_tokens(std::span<const SequenceChunk> chunks) {
  const ModelConfig& c = local_;
  float* row = scratch_->x.data();
  for (const SequenceChunk& ch : chunks) {
    for (const int32_t token : ch.tokens) {
      kernels::dequantize_weight_row(weights_.tok_embd, token, row);
      if (c.embd_scale != 1.0f) kernels::scale_inplace(row, c.embd_scale, c.n_embd);
      row += c.n_embd;
    }
  }
}

void Model::final_norm_rows(std::span<const SequenceChunk> chunks, int64_t R) {
  const ModelConfig& c = local_;
  Scratch& s = *scratch_;
  grow_scratch(s.rows, R * c.n_embd);
  int64_t r = 0;
  int64_t t = 0;
  for (const SequenceChunk& ch : chunks) {
    const int64_t n = static_cast<int64_t>(ch.tokens.size());
    const int64_t first = t + n - num_logit_rows(ch);
    for (int64_t i = first; i < t + n; ++i, ++r) {
      kernels::rms_norm(s.x.data() + i * c.n_embd, weights_.output_norm.data, s.rows.data() + r * c.n_embd, c.n_embd,
                        c.rms_eps);
    }
    t += n;
  }
  // Granite divides the logits by logit_scale. The projection is linear, so
  // the rows are divided instead: one place, whatever the vocabulary split.
  if (c.logit_scale != 1.0f) kernels::scale_inplace(s.rows.data(), 1.0f / c.logit_scale, R * c.n_embd);
}

void Model::write_hidden_rows(std::span<const SequenceChunk> chunks, float* out) const {
  const ModelConfig& c = local_;
  const Scratch& s = *scratch_;
  int64_t t = 0;
  for (const SequenceChunk& ch : chunks) {
    const int64_t n = static_cast<int64_t>(ch.tokens.size());
    for (int64_t i = 0; i < num_hidden_rows(ch); ++i, out += c.n_embd)
      kernels::rms_norm(s.x.data() + (t + i) * c.n_embd, weights_.output_norm.data, out, c.n_embd, c.rms_eps);
    t += n;
  }
}

void Model::project_logits(int64_t R, float* logits, int tag, ThreadPool& pool) {
  Scratch& s = *scratch_;
  const int64_t V = config_.n_vocab;
  // Where the full rows go: straight into the caller's logits on the root,
  // else a buffer sent to it (pipeline) or nowhere (tensor ranks > 0).
  float* full = logits;
  if (full == nullptr) {
    grow_scratch(s.logits, R * V);
    full = s.logits.data();
  }
  // Gemma 2 soft-caps each logit, elementwise: the same on a rank's share.
  const float cap = config_.final_softcap;
  if (shard_.tp_size == 1) {
    matmul(weights_.output, s.rows.data(), R, full, pool);
    if (!s.lora_logits.empty())
      add_lora_deltas(
          s.lora_logits, [](const LoraAdapter& a) -> const LoraPair& { return a.output(); }, s.rows.data(), full, pool,
          s.lora);
    if (cap > 0.0f) softcap_inplace(full, R * V, cap, pool);
  } else {
    // Each tensor rank projects onto its share of the vocabulary.
    grow_scratch(s.logits_part, R * weights_.output.rows);
    matmul(weights_.output, s.rows.data(), R, s.logits_part.data(), pool);
    if (cap > 0.0f) softcap_inplace(s.logits_part.data(), R * weights_.output.rows, cap, pool);
    std::vector<int64_t> widths;
    for (int r = 0; r < shard_.tp_size; ++r) {
      ModelShard other = shard_;
      other.tp_rank = r;
      widths.push_back(vocab_part(config_, other).size());
    }
    comm_->tp_gather_columns(s.logits_part.data(), R, widths, full);
  }
  if (shard_.pp_size > 1 && shard_.tp_rank == 0) comm_->send_logits(full, R * V, tag);
}

void Model::matmul(const kernels::WeightView& w, const float* x, int64_t num_tokens, float* y, ThreadPool& pool) {
  if (matmul_hook_ != nullptr && matmul_hook_->matmul(w, x, num_tokens, y, pool)) return;
  kernels::matmul(w, x, num_tokens, y, pool);
}

void Model::layer_matmul(int64_t layer, LoraSlot slot, const kernels::WeightView& w, const float* x, float* y,
                         ThreadPool& pool) {
  Scratch& s = *scratch_;
  matmul(w, x, s.num_tokens, y, pool);
  if (s.lora_tokens.empty()) return;
  add_lora_deltas(
      s.lora_tokens, [&](const LoraAdapter& a) -> const LoraPair& { return a.pair(layer, slot); }, x, y, pool, s.lora);
}

}  // namespace tokenmill::model
