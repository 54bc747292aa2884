// W8A8: INT8 weights times INT8 activations with integer dot products.
//
// Weights are Q8_0 blocks (32 int8 with an fp16 scale each, GGUF's layout, so
// a W8A8 model is an ordinary Q8_0 file). Activations are quantized per
// token, symmetric: s_t = max_c |x[t, c]| / 127, q = round(x / s_t) in
// [-127, 127]. Then
//   y[t, r] = s_t * sum_b d[r, b] * (sum_{i < 32} qw[r, b, i] * qx[t, 32 b + i])
// where the inner sum is exact integer arithmetic. Per-token scales are what
// makes the activation side coarse (one outlier channel sets the step of the
// whole token), which is what SmoothQuant's smoothing (quant/smoothquant.h)
// is for.
#pragma once

#include <cstdint>

#include "kernels/matmul.h"
#include "util/thread_pool.h"

namespace tokenmill::kernels {

// q: [num_tokens, cols], scales: [num_tokens]. An all-zero token gets scale 0.
void quantize_activations_q8(const float* x, int64_t num_tokens, int64_t cols, int8_t* q, float* scales);

// y[t, r] = W8A8 product above. w.type must be Q8_0 and w.cols % 32 == 0
// (checked). x: [num_tokens, w.cols], y: [num_tokens, w.rows]. Rows split
// over the pool; activation quantization done once per call (cost: one pass
// over x). Uses AVX2 (maddubs) where the active kernel table has it; the integer sums are
// exact either way, so both paths agree up to float summation order.
void matmul_w8a8(const WeightView& w, const float* x, int64_t num_tokens, float* y, ThreadPool& pool);
// Scalar, single-threaded; for tests.
void matmul_w8a8_ref(const WeightView& w, const float* x, int64_t num_tokens, float* y);
// Rows [row_begin, row_end) for quantized activations qx [num_tokens, cols]
// (num_tokens <= 4), scales sx [num_tokens]: the scalar table's w8a8_rows
// (dispatch.h).
void w8a8_rows_ref(const WeightView& w, int64_t row_begin, int64_t row_end, const int8_t* qx, const float* sx,
                   int64_t num_tokens, float* y);

}  // namespace tokenmill::kernels
