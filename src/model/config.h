// Model hyperparameters read from GGUF metadata. One struct for every
// architecture; the flags say which variant of the decoder layer to run.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gguf/reader.h"

namespace tokenmill::model {

enum class Arch { Llama, Qwen2, Gemma3 };

struct ModelConfig {
  Arch arch = Arch::Llama;
  std::string arch_name;  // general.architecture as stored

  int64_t n_vocab = 0;
  int64_t n_ctx_train = 0;
  int64_t n_embd = 0;
  int64_t n_layer = 0;
  int64_t n_head = 0;
  int64_t n_kv_head = 0;
  int64_t head_dim = 0;  // per-head size of Q and K (and V); independent of n_embd / n_head
  int64_t n_ff = 0;
  float rms_eps = 1e-5f;

  // Rotary embedding. Global layers use rope_base; gemma3's sliding-window
  // layers use rope_base_local. freq_scale multiplies positions (linear scaling).
  float rope_base = 10000.0f;
  float rope_base_local = 10000.0f;
  float rope_freq_scale = 1.0f;
  float rope_freq_scale_local = 1.0f;
  int64_t rope_dims = 0;   // leading dims of each head that rotate
  bool rope_neox = false;  // pairs (i, i + d/2) instead of (2i, 2i+1)

  // Sliding-window attention: layer_is_local[i] selects a window of
  // `sliding_window` positions for layer i.
  int64_t sliding_window = 0;
  std::vector<bool> layer_is_local;

  bool ffn_gelu = false;    // GELU(tanh)-gated FFN (gemma) instead of SiLU-gated (SwiGLU)
  float embd_scale = 1.0f;  // token embeddings are multiplied by this (gemma: sqrt(n_embd))
  float attn_scale = 0.0f;  // multiplies q·k; 1/sqrt(head_dim) unless the arch says otherwise

  int64_t n_q_dim() const { return n_head * head_dim; }
  int64_t n_kv_dim() const { return n_kv_head * head_dim; }

  // Reads and validates the hyperparameters. Throws Error naming the file and
  // key for an unsupported architecture, a missing key or impossible values.
  static ModelConfig from_gguf(const gguf::GgufFile& file);
};

const char* arch_name(Arch arch);

}  // namespace tokenmill::model
