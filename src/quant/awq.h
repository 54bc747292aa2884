// AWQ (Lin et al., 2023): activation-aware scaling. A few input channels
// carry large activations, and the weights that multiply them matter most;
// scaling those columns up by s_j before quantization (and the input down by
// s_j, folded into the norm or the previous matrix: input_groups.h) gives
// them a finer effective grid. Per group of matrices sharing an input, the
// factors are s = mean|x|^alpha (normalised by sqrt(max * min)), with alpha
// chosen on a grid to minimise the group's layer output error on the
// calibration data,
//   sum over rows r of d_r^T H d_r,  d_r = w_r - Q(w_r * s) / s,
// with H = mean x x^T (so the error is exactly the mean squared output
// error over the calibration tokens). alpha = 0 (s = 1, plain rounding) is
// on the grid, so the chosen factors are never worse on the rows searched.
#pragma once

#include <cstdint>
#include <vector>

#include "gguf/tensor_type.h"
#include "util/thread_pool.h"

namespace tokenmill::quant {

struct AwqMatrix {
  gguf::TensorType type;  // the type it will be stored in
  const float* w;         // [rows, cols]
  int64_t rows;
};

struct AwqResult {
  std::vector<float> scales;  // [cols]: W[:, j] *= s_j, input / s_j
  float alpha = 0.0f;
  double error = 0.0;        // output error of the chosen factors (rows searched)
  double plain_error = 0.0;  // ... of plain rounding (alpha = 0)
};

struct AwqOptions {
  int grid = 20;                      // alpha in {0, 1/grid, ..., (grid-1)/grid}
  int64_t eval_budget = 256LL << 20;  // multiply-adds per matrix and alpha: rows searched ~ budget / cols^2
  bool weighted = false;              // importance-weighted rounding (mean x^2 / s^2)
};

// h: [cols, cols] mean x x^T (float64, full); mean_abs, mean_sq: [cols].
AwqResult search_awq_scales(const std::vector<AwqMatrix>& group, int64_t cols, const std::vector<double>& h,
                            const std::vector<float>& mean_abs, const std::vector<float>& mean_sq,
                            const AwqOptions& options, ThreadPool& pool);

}  // namespace tokenmill::quant
