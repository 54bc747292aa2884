// GPTQ (Frantar et al., 2022): quantizes a weight matrix column by column,
// and after each column spreads its rounding error over the columns not yet
// quantized, as the inverse of the input Hessian H = X^T X prescribes, so
// that the layer's output X W^T moves as little as the grid allows
// (second-order, per row; rows are independent given H).
//
// GGUF block types: when the quantization reaches the first column of a
// block (32 elements, or a K-quant super-block of 256), the block's scales
// are chosen from the weights as compensated so far by the type's own
// quantizer (importance-weighted when given), and its columns are then
// rounded one by one on that fixed grid (block_grid.h). Columns are
// processed in lazy batches (a multiple of the block) so that the update
// of the remaining columns is one rank-batch product per batch. The
// damping and the order are chosen per group on the calibration loss by
// gptq_search.h; layer-by-layer calibration is calibrated_quant.cc's.
#pragma once

#include <cstdint>
#include <vector>

#include "gguf/tensor_type.h"
#include "util/thread_pool.h"

namespace tokenmill::quant {

struct GptqFactor {
  int64_t cols = 0;
  // The order in which the columns are quantized: order[k] = the column
  // quantized k-th. Empty: natural order. Act-order (the paper's
  // "act_order") takes the columns by decreasing H diagonal, so that the
  // inputs that matter most are rounded while the most columns are left to
  // absorb their error.
  std::vector<int32_t> order;
  // u, dead: in quantization order (position k is column order[k]).
  std::vector<float> u;       // [cols, cols] upper triangular, U^T U = (H + damping)^-1
  std::vector<uint8_t> dead;  // [cols] 1 where H's diagonal was 0 (input always 0)
  double damp_used = 0.0;     // fraction of the mean diagonal added
};

// From H [cols, cols] (symmetric, e.g. InputHessian::mean_full()): dead
// columns get a unit diagonal, `damp` x mean(diag) is added to the
// diagonal, and U is the upper Cholesky factor of the inverse (computed as
// the inverse of the Cholesky factor of H with rows and columns reversed).
// With act_order, H is first permuted to the order of decreasing diagonal.
// If float rounding leaves H not positive definite, the damping is raised
// tenfold (up to 1); then Error. Cost ~cols^3 / 3 multiply-adds (double).
GptqFactor gptq_factor(std::vector<double> h, int64_t cols, double damp, ThreadPool& pool, bool act_order = false);

// Quantizes w [rows, cols] (float, overwritten with the compensated values
// as it goes) into `type` blocks at out (rows * row_bytes(type, cols)
// bytes). importance [cols] (or null) weights the block scale search.
//
// Natural order: each block's scales are chosen when the sweep reaches its
// first column, from the weights as compensated so far. Act-order (a
// factor with an order): the columns of one block are no longer
// quantized together, so every block's scales are chosen up front from the
// weights as given ("static groups"), and each column is rounded on its
// block's fixed grid when its turn comes.
//
// clip_ratios [rows, cols / block] (or null): AWQ's clipping
// (awq.h search_awq_clip) as GPTQ's "mse" grid search uses it — a block's
// scales are chosen from a copy clamped to that fraction of its max|w|,
// while the weights themselves stay unclamped, so the error of an outlier
// beyond the grid is compensated like any other.
//
// Preconditions: has_block_grid(type), cols a multiple of its block size,
// factor.cols == cols. Cost ~rows * cols^2 / 2 multiply-adds, over the pool.
void gptq_quantize(gguf::TensorType type, float* w, int64_t rows, int64_t cols, const GptqFactor& factor,
                   const float* importance, uint8_t* out, ThreadPool& pool, const float* clip_ratios = nullptr);

}  // namespace tokenmill::quant
