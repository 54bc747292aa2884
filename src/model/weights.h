// Views of a model's tensors inside the memory-mapped GGUF file. Nothing is
// copied: every WeightView points into the map, which the Model keeps alive.
// Small vectors (norms, biases) are F32 views too; they are read in place.
#pragma once

#include <cstdint>
#include <vector>

#include "gguf/reader.h"
#include "kernels/matmul.h"
#include "model/config.h"

namespace tokenmill::model {

// A 1-D F32 tensor (norm weight, bias) of `size` elements.
struct VectorView {
  const float* data = nullptr;
  int64_t size = 0;
  bool present() const { return data != nullptr; }
};

// A file may fuse q/k/v into attn_qkv and gate/up into ffn_up (phi3): wq, wk,
// wv and w_gate, w_up are then row ranges of the fused tensor, still views
// into the map, so nothing downstream knows the difference.
struct LayerWeights {
  VectorView attn_norm;        // [n_embd]; absent without pre-norm (olmo2)
  kernels::WeightView wq;      // [n_head*head_dim, n_embd]  (rows = out)
  kernels::WeightView wk;      // [n_kv_head*head_dim, n_embd]
  kernels::WeightView wv;      // [n_kv_head*head_dim, n_embd]
  kernels::WeightView wo;      // [n_embd, n_head*head_dim]
  VectorView bq, bk, bv;       // qwen2 only: [n_q_dim], [n_kv_dim], [n_kv_dim]
  VectorView q_norm, k_norm;   // per head [head_dim] (gemma3, qwen3) or full [n_q_dim], [n_kv_dim] (olmo2)
  VectorView post_attn_norm;   // gemma3, olmo2: [n_embd]
  VectorView ffn_norm;         // [n_embd]; absent without pre-norm (olmo2)
  kernels::WeightView w_gate;  // [n_ff, n_embd]
  kernels::WeightView w_up;    // [n_ff, n_embd]
  kernels::WeightView w_down;  // [n_embd, n_ff]
  VectorView post_ffn_norm;    // gemma3, olmo2: [n_embd]

  // Mixture of experts (ModelConfig::is_moe(); w_gate, w_up, w_down then
  // absent). Expert e's matrices are views of slice e of the stacked GGUF
  // tensors ffn_{gate,up,down}_exps [n_expert, rows, cols].
  kernels::WeightView router;                  // ffn_gate_inp [n_expert, n_embd]
  std::vector<kernels::WeightView> gate_exps;  // n_expert x [n_ff_exp, n_embd]
  std::vector<kernels::WeightView> up_exps;    // n_expert x [n_ff_exp, n_embd]
  std::vector<kernels::WeightView> down_exps;  // n_expert x [n_embd, n_ff_exp]
  // The shared expert (qwen2moe): its sigmoid gate's weights and its FFN.
  VectorView shexp_gate;           // ffn_gate_inp_shexp [n_embd]
  kernels::WeightView gate_shexp;  // [n_ff_shexp, n_embd]
  kernels::WeightView up_shexp;    // [n_ff_shexp, n_embd]
  kernels::WeightView down_shexp;  // [n_embd, n_ff_shexp]
};

// Rows [begin, begin + rows) of w, viewing the same bytes. A row is whole
// quantization blocks, so any row range of a quantized matrix is a valid
// matrix of that type (no interleaved copy: that is the whole matrix's).
kernels::WeightView row_range(const kernels::WeightView& w, int64_t begin, int64_t rows);

struct ModelWeights {
  kernels::WeightView tok_embd;  // [n_vocab, n_embd]
  VectorView output_norm;        // [n_embd]
  kernels::WeightView output;    // [n_vocab, n_embd]; the embedding when tied
  VectorView rope_freqs;         // llama3 scaling factors [rope_dims/2], optional
  VectorView rope_factors_long;  // phi3 LongRoPE factors [rope_dims/2], optional (both or neither)
  VectorView rope_factors_short;
  std::vector<LayerWeights> layers;

  // Binds every tensor the architecture needs, checking names, types and
  // shapes. Throws Error naming the file and the missing or misshapen tensor.
  static ModelWeights bind(const gguf::GgufFile& file, const ModelConfig& config);
};

}  // namespace tokenmill::model
