// Matrix multiplication with a quantized (or float) weight matrix.
#pragma once

#include <cstdint>

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
};

// y[t, r] = sum_c W[r, c] * x[t, c]  for t < num_tokens.
// x: [num_tokens, w.cols] contiguous; y: [num_tokens, w.rows] contiguous.
// Work is split over rows across the pool. Accumulates in FP32.
void matmul(const WeightView& w, const float* x, int64_t num_tokens, float* y, ThreadPool& pool);

// The same product computed by the scalar reference path (single thread,
// dequantize then dot in double); for tests.
void matmul_ref(const WeightView& w, const float* x, int64_t num_tokens, float* y);

// Copies row `row` of w, dequantized, into dst [w.cols] (embedding lookup).
void dequantize_weight_row(const WeightView& w, int64_t row, float* dst);

}  // namespace tokenmill::kernels
