// SmoothQuant smoothing for W8A8: per input channel j of a group of
// matrices that share an input X, s_j = max|X_j|^alpha / max|W_j|^(1-alpha)
// (max|W_j| over the column j of every matrix in the group), then
// X' = X / s and W' = W diag(s): the product is unchanged in exact
// arithmetic, but activation outliers move into the weights, which quantize
// per 32-element block and tolerate them better than per-token activations.
//
// The division of X is folded into whatever produced X, so nothing is added
// at run time:
//   * attn_q/attn_k/attn_v: X = rms_norm(x) * attn_norm -> attn_norm / s;
//   * ffn_gate/ffn_up:      X = rms_norm(x) * ffn_norm  -> ffn_norm / s;
//   * ffn_down:             X = act(gate) * up          -> ffn_up rows / s.
// A fused attn_qkv or gate/up ffn_up (phi3) is smoothed as its group; the
// ffn_down of a fused ffn_up is not.
// attn_output is left unsmoothed (its input comes out of the attention
// average; folding into V would need per-KV-head-consistent factors).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "gguf/reader.h"
#include "model/config.h"
#include "quant/imatrix.h"

namespace tokenmill::quant {

struct SmoothingPlan {
  std::map<std::string, std::vector<float>> col_scale;      // matrix -> s [cols]: W[:, j] *= s_j
  std::map<std::string, std::vector<float>> row_divide;     // matrix -> s [rows]: W[r, :] /= s_r
  std::map<std::string, std::vector<float>> vector_divide;  // F32 vector -> s: v_j /= s_j
  bool empty() const { return col_scale.empty(); }
};

// Factors for every layer whose group has activation maxima in `im`
// (abs_max); layers without them are left alone. Reads every smoothed
// matrix once (dequantized) for its column maxima. Factors are clamped to
// [1e-4, 1e4]; a channel with no activation or weight magnitude gets 1.
SmoothingPlan plan_smoothing(const gguf::GgufFile& file, const model::ModelConfig& config, const Imatrix& im,
                             float alpha);

// The factors `m` holds for `name`, or null.
const std::vector<float>* find_factors(const std::map<std::string, std::vector<float>>& m, const std::string& name);

// Column maxima max_r |W[r, c]| of one matrix tensor [cols].
std::vector<float> column_abs_max(const gguf::TensorInfo& t);

}  // namespace tokenmill::quant
