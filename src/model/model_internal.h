// What the files implementing Model (model_*.cc) share: the step's scratch
// buffers and a pool layer as the paged kernels see it. Only those files
// include this header.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/paged_attention.h"
#include "kv/paged_kv_storage.h"
#include "model/lora_apply.h"
#include "model/model.h"
#include "model/moe_expert_parallel.h"
#include "model/moe_ffn.h"

namespace tokenmill::model {

// Activations of the current step, reused across steps (resized, never shrunk).
struct Model::Scratch {
  std::vector<float> x;            // [T, n_embd]   residual stream
  std::vector<float> xb;           // [T, n_embd]   normalised input / block output
  std::vector<float> q;            // [T, n_q_dim]
  std::vector<float> k;            // [T, n_kv_dim]
  std::vector<float> v;            // [T, n_kv_dim]
  std::vector<float> att;          // [T, n_q_dim]
  std::vector<float> gate;         // [T, n_ff]
  std::vector<float> up;           // [T, n_ff]
  std::vector<float> rows;         // [R, n_embd]   final hidden states that need logits
  std::vector<float> logits_part;  // [R, vocab share]  tensor parallel: this rank's columns
  std::vector<float> logits;       // [R, n_vocab]  pipeline: the rows sent back to the root
  int64_t num_tokens = 0;
  // LoRA: the step's token rows and logits rows by adapter (empty: none).
  std::vector<LoraRows> lora_tokens;
  std::vector<LoraRows> lora_logits;
  LoraScratch lora;
  MoeScratch moe;
  ExpertParallelScratch expert_parallel;
};

// Grows a scratch buffer to at least n elements (never shrinks it, so a
// step allocates only when it is the largest so far).
inline void grow_scratch(std::vector<float>& v, int64_t n) {
  if (static_cast<int64_t>(v.size()) < n) v.resize(static_cast<size_t>(n));
}

// Layer `layer` of the pool, as the paged kernels see it.
inline kernels::PagedKv layer_kv(kv::PagedKvStorage& kv, int64_t layer) {
  const kv::KvGeometry& g = kv.geometry();
  return kernels::PagedKv{kv.keys(layer), kv.values(layer), kv::kv_storage_dtype(g.dtype),
                          g.block_size,   g.n_kv_dim,       kv.num_blocks()};
}

}  // namespace tokenmill::model
