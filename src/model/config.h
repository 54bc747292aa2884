// Model hyperparameters read from GGUF metadata. One struct for every
// architecture; the flags say which variant of the decoder layer to run.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/reader.h"

namespace tokenmill::model {

// How positions are stretched past the trained context. kLlama3: the
// file's rope_freqs tensor divides each pair's frequency (Llama 3.1).
// kLongRope (phi3 128k): rope_factors_long or _short does, the long ones
// when the context exceeds the original one (as llama.cpp chooses).
enum class RopeScalingType { kNone, kLinear, kYarn, kLlama3, kLongRope };

// The type named as GGUF's rope.scaling.type and the command line spell it
// ("none", "linear", "yarn", "llama3", "longrope"); nullopt for any other.
inline std::optional<RopeScalingType> parse_rope_scaling_type(std::string_view name) {
  if (name == "none") return RopeScalingType::kNone;
  if (name == "linear") return RopeScalingType::kLinear;
  if (name == "yarn") return RopeScalingType::kYarn;
  if (name == "llama3") return RopeScalingType::kLlama3;
  if (name == "longrope") return RopeScalingType::kLongRope;
  return std::nullopt;
}

// Mixture-of-experts files: qwen2moe (Qwen1.5/2-MoE: a gated shared
// expert beside the routed ones), qwen3moe, olmoe; Mixtral is a `llama`
// file with expert keys.
enum class Arch { Llama, Qwen2, Gemma3, Qwen3, Olmo2, Granite, Phi3, Gemma2, Qwen2Moe, Qwen3Moe, Olmoe };

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
  // RoPE scaling (model/rope_config.h reads it and builds the kernel's
  // parameters). For linear and yarn, rope_freq_scale = 1 / factor.
  RopeScalingType rope_scaling = RopeScalingType::kNone;
  float rope_scaling_factor = 1.0f;  // context extension factor (1 = none)
  int64_t rope_orig_ctx = 0;         // yarn: original_context_length (n_ctx_train when absent)
  float rope_attn_factor = 1.0f;     // rope.scaling.attn_factor: multiplies cos and sin
  float yarn_ext_factor = 0.0f;      // 1 for yarn unless the file stores another value
  float yarn_beta_fast = 32.0f;
  float yarn_beta_slow = 1.0f;
  int64_t n_ctx_file = 0;  // context_length as stored; n_ctx_train may be raised by --ctx

  // Sliding-window attention: layer_is_local[i] selects a window of
  // `sliding_window` positions for layer i.
  int64_t sliding_window = 0;
  std::vector<bool> layer_is_local;

  bool ffn_gelu = false;    // GELU(tanh)-gated FFN (gemma) instead of SiLU-gated (SwiGLU)
  float embd_scale = 1.0f;  // token embeddings are multiplied by this (gemma: sqrt(n_embd))
  float attn_scale = 0.0f;  // multiplies q·k; 1/sqrt(head_dim) unless the arch says otherwise

  // Norm placement around the two sub-blocks of a layer. pre_norm: the block
  // reads rms_norm(x) (attn_norm / ffn_norm); olmo2 reads x itself.
  // post_norms: the block's output is normalised (post_attention_norm /
  // post_ffw_norm) before the residual add (gemma3, olmo2).
  bool pre_norm = true;
  bool post_norms = false;
  // RMS norm of the projected q and k before RoPE: per head with one
  // [head_dim] weight (gemma3, qwen3), or over the whole projection with
  // [n_q_dim] / [n_kv_dim] weights before the split into heads (olmo2).
  enum class QkNorm { kNone, kPerHead, kFullWidth };
  QkNorm qk_norm = QkNorm::kNone;
  // Granite's multipliers: each block's output is multiplied by
  // residual_scale before the residual add; the logits are divided by
  // logit_scale.
  float residual_scale = 1.0f;
  float logit_scale = 1.0f;
  // Soft-capping (gemma2), 0 = none: attention scores (after attn_scale)
  // become cap * tanh(score / cap), and so do the final logits.
  float attn_softcap = 0.0f;
  float final_softcap = 0.0f;

  // Mixture of experts (n_expert > 0): every layer's FFN is a router over
  // n_expert SwiGLU experts of width n_ff_exp; each token runs through the
  // n_expert_used most probable (softmax over all experts, in float32),
  // weighted by their probabilities, renormalised to sum to one when
  // expert_weights_norm (Mixtral, Qwen3-MoE; not Qwen2-MoE, OLMoE).
  // n_ff_shexp > 0: a shared expert of that width runs for every token,
  // scaled by sigmoid(ffn_gate_inp_shexp . x) (qwen2moe).
  int64_t n_expert = 0;
  int64_t n_expert_used = 0;
  int64_t n_ff_exp = 0;
  int64_t n_ff_shexp = 0;
  bool expert_weights_norm = false;
  bool is_moe() const { return n_expert > 0; }

  int64_t n_q_dim() const { return n_head * head_dim; }
  int64_t n_kv_dim() const { return n_kv_head * head_dim; }

  // Reads and validates the hyperparameters. Throws Error naming the file and
  // key for an unsupported architecture, a missing key or impossible values.
  static ModelConfig from_gguf(const gguf::GgufFile& file);
};

const char* arch_name(Arch arch);

}  // namespace tokenmill::model
