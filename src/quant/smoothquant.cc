#include "quant/smoothquant.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "kernels/quant.h"
#include "quant/input_groups.h"

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

// Smooths one group (its matrices share an input), folding 1/s into its
// norm vector or the rows of its fold matrix.
void smooth_group(const gguf::GgufFile& file, const Imatrix& im, float alpha, const InputGroup& g,
                  SmoothingPlan& plan) {
  const int64_t cols = file.tensor(g.matrices[0]).row_length();
  const std::vector<float> x_max = activation_max(im, g.matrices, cols);
  if (x_max.empty()) return;
  std::vector<float> w_max(static_cast<size_t>(cols), 0.0f);
  for (const std::string& n : g.matrices) {
    const std::vector<float> m = column_abs_max(file.tensor(n));
    for (size_t c = 0; c < w_max.size(); ++c) w_max[c] = std::max(w_max[c], m[c]);
  }
  const std::vector<float> s = factors(x_max, w_max, alpha);
  for (const std::string& n : g.matrices) plan.col_scale[n] = s;
  if (!g.fold_vector.empty()) plan.vector_divide[g.fold_vector] = s;
  if (!g.fold_rows.empty()) plan.row_divide[g.fold_rows] = s;
}

}  // namespace

const std::vector<float>* find_factors(const std::map<std::string, std::vector<float>>& m, const std::string& name) {
  const auto it = m.find(name);
  return it == m.end() ? nullptr : &it->second;
}

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
  for (const InputGroup& g : input_groups(file, config)) {
    if (g.can_fold()) smooth_group(file, im, alpha, g, plan);
  }
  return plan;
}

}  // namespace tokenmill::quant
