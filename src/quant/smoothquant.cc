#include "quant/smoothquant.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "kernels/quant.h"

namespace tokenmill::quant {
namespace {

// Elementwise max of the activation maxima recorded for the matrices of a
// group (they share one input); empty when none has them.
std::vector<float> activation_max(const Imatrix& im, const std::vector<std::string>& names, int64_t cols) {
  std::vector<float> out;
  for (const std::string& n : names) {
    const ChannelStats* s = im.find(n);
    if (s == nullptr || s->abs_max.size() != static_cast<size_t>(cols)) continue;
    if (out.empty()) out.assign(static_cast<size_t>(cols), 0.0f);
    for (size_t c = 0; c < out.size(); ++c) out[c] = std::max(out[c], s->abs_max[c]);
  }
  return out;
}

std::vector<float> factors(const std::vector<float>& x_max, const std::vector<float>& w_max, float alpha) {
  std::vector<float> s(x_max.size(), 1.0f);
  for (size_t j = 0; j < s.size(); ++j) {
    if (x_max[j] <= 0.0f || w_max[j] <= 0.0f) continue;
    const double v = std::pow(double(x_max[j]), alpha) / std::pow(double(w_max[j]), 1.0 - alpha);
    s[j] = static_cast<float>(std::clamp(v, 1e-4, 1e4));
  }
  return s;
}

// Smooths one group: matrices `names` (sharing an input of `cols`), folding
// 1/s into `vector_name` (a norm) or into the rows of `row_matrix`.
void smooth_group(const gguf::GgufFile& file, const Imatrix& im, float alpha, const std::vector<std::string>& names,
                  const std::string& vector_name, const std::string& row_matrix, SmoothingPlan& plan) {
  const gguf::TensorInfo* first = file.find_tensor(names[0]);
  if (first == nullptr) return;
  // No norm to fold 1/s into (olmo2 has none in front of its blocks): the
  // group's input is the raw residual stream and stays unsmoothed.
  if (!vector_name.empty() && file.find_tensor(vector_name) == nullptr) return;
  const int64_t cols = first->row_length();
  const std::vector<float> x_max = activation_max(im, names, cols);
  if (x_max.empty()) return;
  std::vector<float> w_max(static_cast<size_t>(cols), 0.0f);
  for (const std::string& n : names) {
    const std::vector<float> m = column_abs_max(file.tensor(n));
    for (size_t c = 0; c < w_max.size(); ++c) w_max[c] = std::max(w_max[c], m[c]);
  }
  const std::vector<float> s = factors(x_max, w_max, alpha);
  for (const std::string& n : names) plan.col_scale[n] = s;
  if (!vector_name.empty()) plan.vector_divide[vector_name] = s;
  if (!row_matrix.empty()) plan.row_divide[row_matrix] = s;
}

}  // namespace

std::vector<float> column_abs_max(const gguf::TensorInfo& t) {
  const int64_t cols = t.row_length();
  const int64_t row_bytes = gguf::row_bytes(t.type, cols);
  std::vector<float> row(static_cast<size_t>(cols)), out(static_cast<size_t>(cols), 0.0f);
  for (int64_t r = 0; r < t.num_rows(); ++r) {
    kernels::dequantize_row_ref(t.type, t.data + r * row_bytes, row.data(), cols);
    for (int64_t c = 0; c < cols; ++c)
      out[static_cast<size_t>(c)] = std::max(out[static_cast<size_t>(c)], std::fabs(row[static_cast<size_t>(c)]));
  }
  return out;
}

SmoothingPlan plan_smoothing(const gguf::GgufFile& file, const model::ModelConfig& config, const Imatrix& im,
                             float alpha) {
  SmoothingPlan plan;
  for (int64_t l = 0; l < config.n_layer; ++l) {
    const std::string p = fmt::format("blk.{}.", l);
    // Fused files (phi3) hold q/k/v in attn_qkv and gate/up in ffn_up (gate
    // rows first). Their ffn_down is left alone: its factors would have to
    // divide only the up half of ffn_up's rows.
    const bool fused_qkv = file.find_tensor(p + "attn_qkv.weight") != nullptr;
    const bool fused_gate_up = file.find_tensor(p + "ffn_gate.weight") == nullptr;
    const std::vector<std::string> qkv =
        fused_qkv ? std::vector<std::string>{p + "attn_qkv.weight"}
                  : std::vector<std::string>{p + "attn_q.weight", p + "attn_k.weight", p + "attn_v.weight"};
    const std::vector<std::string> gate_up = fused_gate_up
                                                 ? std::vector<std::string>{p + "ffn_up.weight"}
                                                 : std::vector<std::string>{p + "ffn_gate.weight", p + "ffn_up.weight"};
    smooth_group(file, im, alpha, qkv, p + "attn_norm.weight", "", plan);
    smooth_group(file, im, alpha, gate_up, p + "ffn_norm.weight", "", plan);
    if (!fused_gate_up) smooth_group(file, im, alpha, {p + "ffn_down.weight"}, "", p + "ffn_up.weight", plan);
  }
  return plan;
}

}  // namespace tokenmill::quant
