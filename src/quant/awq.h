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

inline constexpr int kClipSteps = 10;  // max|w| x {1, 0.95, ..., 0.55}

struct AwqOptions {
  int grid = 20;                      // alpha in {0, 1/grid, ..., (grid-1)/grid}
  int64_t eval_budget = 256LL << 20;  // multiply-adds per matrix and alpha: rows searched ~ budget / cols^2
  bool weighted = false;              // importance-weighted rounding (mean x^2 / s^2)
  // Clipping candidates (search_awq_clip); 1: no clipping; 0: automatic,
  // kClipSteps where the rounding is plain and none with GPTQ or the
  // imatrix's weighted scales (measured worse on top of them,
  // docs/quantization.md).
  int clip_steps = 0;
};

// h: [cols, cols] mean x x^T (float64, full); mean_abs, mean_sq: [cols].
AwqResult search_awq_scales(const std::vector<AwqMatrix>& group, int64_t cols, const std::vector<double>& h,
                            const std::vector<float>& mean_abs, const std::vector<float>& mean_sq,
                            const AwqOptions& options, ThreadPool& pool);

// AWQ's clipping search: per row and block of `type` (32 elements, or a
// K-quant's 256), the fraction of the block's max|w| above which weights
// are clamped, among {1, 1 - 1/20, ..., 1 - (steps-1)/20}, chosen to
// minimise the block's output error d^T H_bb d against the unclipped
// weights (H_bb: the block's diagonal sub-block of the input Hessian; the
// cross-block terms are left out, as the paper's per-group search leaves
// them). Clipping trades a larger error on a few outliers for a finer grid
// on the rest. w: [rows, cols] as they will be stored (AWQ factors
// applied); h: the Hessian of that matrix's input, [cols, cols] (full,
// double); importance [cols] or null (the rounding's weights). Returns
// [rows, cols / block] ratios. Cost: rows x cols x steps x (block + a
// block's quantization) multiply-adds, over the pool.
std::vector<float> search_awq_clip(gguf::TensorType type, const float* w, int64_t rows, int64_t cols,
                                   const std::vector<double>& h, const float* importance, int steps, ThreadPool& pool);

// Clamps x[0, n) to ratio x its largest magnitude.
void clip_block(float* x, int64_t n, float ratio);

// Clamps each block of w, rows [first_row, first_row + rows) of the matrix,
// by its ratio from search_awq_clip (ratios of the whole matrix).
void apply_awq_clip(gguf::TensorType type, float* w, int64_t first_row, int64_t rows, int64_t cols,
                    const std::vector<float>& ratios);

}  // namespace tokenmill::quant
