// The per-tensor type policy of `tokenmill quantize`: which GGUF type each
// weight matrix gets for a target, and what a matrix whose rows do not fit
// the type's blocks falls back to. Pure functions, no I/O.
//
// Mixtures (the tensors quantization error hurts most get more bits):
//   * the classifier (output.weight, or token_embd.weight when the output is
//     tied to it) -> Q6_K: every logit goes through it, and its error lands
//     directly on the next-token distribution;
//   * attn_v and ffn_down in the layers use_more_bits picks (the first and
//     last eighth of the layers and every third one between) -> Q6_K: V
//     errors pass unattenuated through the attention average, ffn_down
//     writes straight into the residual stream, and the first and last
//     layers matter most (measured by llama.cpp's authors; our card repeats
//     the measurement for Q4_K vs Q4_K_M);
//   * every other matrix -> Q4_K (Q4_K_M) or Q5_K (Q5_K_M).
// Mixture-of-experts layers: each stacked expert tensor (ffn_gate_exps,
// ffn_up_exps, ffn_down_exps) gets one type for all its experts, by the
// same rules (ffn_down_exps and the shared expert's ffn_down_shexp as
// ffn_down); the router (ffn_gate_inp) is never quantized (quantizer.cc).
// Uniform targets give every matrix the one type (like llama.cpp's --pure).
// --keep-output-f16 keeps the classifier in F16 in every target.
// 1-D tensors (norms, biases) are never quantized.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "gguf/tensor_type.h"
#include "quant/quant_target.h"

namespace tokenmill::quant {

// "blk.12.ffn_down.weight" -> {"ffn_down", 12}; "output.weight" -> {"output", -1}.
struct TensorRole {
  std::string role;
  int64_t layer = -1;
};
TensorRole parse_tensor_role(std::string_view name);

// Whether layer `layer` of n_layer gets more bits in the mixtures.
bool use_more_bits(int64_t layer, int64_t n_layer);

// The type a matrix of `row_length`-element rows is stored in when `wanted`
// does not fit (row_length not a multiple of its block size): the 256-block
// K types fall back to the nearest 32-block type of at least as many bits
// (Q2_K, Q3_K -> Q4_0; Q4_K -> Q5_0; Q5_K -> Q5_1; Q6_K -> Q8_0), and what
// still does not fit to F16. Returns `wanted` when it fits.
gguf::TensorType fallback_type(gguf::TensorType wanted, int64_t row_length);

struct TensorChoice {
  gguf::TensorType type;  // what the file stores
  bool fp8_grid = false;  // values rounded to the FP8 E4M3 block grid first (FP8 target)
  std::string note;       // non-empty when the policy fell back, saying why
};

// The choice for one 2-D weight matrix. classifier: the tensor that produces
// the logits (output.weight, or the tied token_embd.weight).
TensorChoice choose_tensor_type(const QuantTarget& target, std::string_view name, int64_t n_layer, bool classifier,
                                bool keep_output_f16, int64_t row_length);

}  // namespace tokenmill::quant
