// Matrix multiplication with a quantized (or float) weight matrix.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "gguf/tensor_type.h"
#include "util/thread_pool.h"

namespace tokenmill::kernels {

// A weight matrix as stored in GGUF: `rows` rows (output features) of `cols`
// elements (input features) each, row-major, in `type` blocks.
struct WeightView {
  gguf::TensorType type = gguf::TensorType::F32;
  const void* data = nullptr;
  int64_t rows = 0;  // n_out
  int64_t cols = 0;  // n_in
  // Optional copy of the same weights in a row-interleaved layout made at
  // load time (interleave.h), used instead of `data` by kernel tables that
  // have a kernel for it; null: none.
  const void* interleaved = nullptr;
};

// y[t, r] = sum_c W[r, c] * x[t, c]  for t < num_tokens.
// x: [num_tokens, w.cols] contiguous; y: [num_tokens, w.rows] contiguous.
// Work is split over rows across the pool. Accumulates in FP32. For decode
// (num_tokens <= 4) with a quantized W, x is first rounded to int16 blocks
// of 32 (relative error <= 2^-16 of each block's largest |x|, see
// quantize_act.h) and the products are exact integer sums; otherwise x is
// used as is. Results do not depend on the pool's thread count.
void matmul(const WeightView& w, const float* x, int64_t num_tokens, float* y, ThreadPool& pool);

// The most matrices one matmul_many call takes.
inline constexpr size_t kMaxMatmulMany = 4;

// ys[i] = x times ws[i] as matmul does, for matrices sharing the input x
// (the q/k/v or gate/up projections): one parallel region instead of one
// per matrix, and x quantized once for the integer decode path. Every
// ws[i].cols is the same; ys[i]: [num_tokens, ws[i].rows]. Results equal
// separate matmul calls bit for bit. At most kMaxMatmulMany matrices.
void matmul_many(std::span<const WeightView> ws, const float* x, int64_t num_tokens, std::span<float* const> ys,
                 ThreadPool& pool);

// One product of a grouped call: y = rows [first_row, first_row +
// num_tokens) of the call's x times w, as matmul computes it (same path,
// same bits as matmul(w, those rows, num_tokens, y)).
struct GroupedProduct {
  const WeightView* w = nullptr;
  int64_t first_row = 0;
  int64_t num_tokens = 0;
  float* y = nullptr;  // [num_tokens, w->rows]
};

// Many products over row ranges of one input x [x_rows, cols] in one
// parallel region: the experts of a mixture-of-experts layer, each reading
// the rows of the tokens routed to it. x is quantized once for the integer
// paths (per row, so a range's values are those a separate call would
// use). Every w has `cols` columns. Cost: each matrix is read once.
void matmul_grouped(std::span<const GroupedProduct> products, const float* x, int64_t x_rows, ThreadPool& pool);

// The same product computed by the scalar reference path (single thread,
// dequantize then dot in double); for tests.
void matmul_ref(const WeightView& w, const float* x, int64_t num_tokens, float* y);

// Copies row `row` of w, dequantized, into dst [w.cols] (embedding lookup).
void dequantize_weight_row(const WeightView& w, int64_t row, float* dst);

}  // namespace tokenmill::kernels
