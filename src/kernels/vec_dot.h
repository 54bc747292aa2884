// Integer dot products of quantized weight rows with quantized activations:
// the decode (few tokens) path of matmul.
//
// For each 32-element sub-block the weights are widened to int16 (any
// integer sub-scale folded in), multiplied with the int16 activations by
// madd_epi16 (exact integer sums), and the sum is scaled by the float
// factors of both sides:
//   y[t, r] = sum_s scale_w[r, s] * d_a[t, s] * (w[r, s] . q_a[t, s])
//           + sum_k bias_w[r, k] * s_a[t, k]      (types with a minimum)
// which is W[r] . dequant(a[t]) up to float rounding.
//
// Reference: the scalar path computes the same product as
// matmul_ref(W, dequantize_acts(a)) — weights dequantized by the reference
// decoders, a double-precision dot — so every type is tested against it
// (matmul_q16_test.cc). The error against the exact product with the float
// activations adds the activation rounding: at most
//   sum_blocks max_block|x| / 65534 * sum_block |w|.
#pragma once

#include <cstdint>

#include "gguf/tensor_type.h"
#include "kernels/gemm.h"
#include "kernels/matmul.h"
#include "kernels/quantize_act.h"

namespace tokenmill::kernels::avx2 {

// Whether q16_rows handles the type (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K,
// Q3_K, Q4_K, Q5_K, Q6_K).
bool q16_supports(gguf::TensorType type);
// y[t * w.rows + r] = W[r] . dequant(a[t]) for r in [row_begin, row_end) and
// t < num_tokens (1..4). a.cols == w.cols. Each output is computed by the
// same operation sequence whatever the row range, so results do not depend
// on how rows are split over threads. Cost: one pass over the rows' bytes,
// faster than DRAM delivers them when the rows are in cache.
void q16_rows(const WeightView& w, int64_t row_begin, int64_t row_end, const QuantizedActs& a, int64_t num_tokens,
              float* y);

// How a type's integer products are scaled (Q16Layout, gemm.h).
Q16Layout q16_layout(gguf::TensorType type);

// One row of a q16-supported type widened for the packed prefill kernel
// (gemm.h): q [cols] the int16 values the integer products use, and per 16
// columns the float scale and additive coefficient (per-32 values repeated
// for both halves), so that row . x = sum_h scale16[h] * (q_h . q_x_h) * d_x
// + bias16[h] * s16_x[h]. Cost: one pass over the row.
void q16_decode_row(gguf::TensorType type, const void* row, int64_t cols, int16_t* q, float* scale16, float* bias16);

// The K-quant half (vec_dot_k_avx2.cc).
Q16Layout q16_layout_k(gguf::TensorType type);
void q16_decode_row_k(gguf::TensorType type, const void* row, int64_t cols, int16_t* q, float* scale16, float* bias16);
bool q16_supports_k(gguf::TensorType type);
void q16_rows_k(const WeightView& w, int64_t row_begin, int64_t row_end, const QuantizedActs& a, int64_t num_tokens,
                float* y);

}  // namespace tokenmill::kernels::avx2
