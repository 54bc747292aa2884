// Per-type scalar (de)quantizers behind quant.h's dispatch, plus the scale
// search shared by the K-quant quantizers. Internal to kernels/: callers use
// quant.h. Counts are in blocks (nb) unless named otherwise.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/quant_blocks.h"

namespace tokenmill::kernels::detail {

// Dequantizers: y [nb * block elements].
void dequantize_q4_0(const BlockQ4_0* x, float* y, int64_t nb);
void dequantize_q4_1(const BlockQ4_1* x, float* y, int64_t nb);
void dequantize_q5_0(const BlockQ5_0* x, float* y, int64_t nb);
void dequantize_q5_1(const BlockQ5_1* x, float* y, int64_t nb);
void dequantize_q8_0(const BlockQ8_0* x, float* y, int64_t nb);
void dequantize_q8_1(const BlockQ8_1* x, float* y, int64_t nb);
void dequantize_q2_k(const BlockQ2_K* x, float* y, int64_t nb);
void dequantize_q3_k(const BlockQ3_K* x, float* y, int64_t nb);
void dequantize_q4_k(const BlockQ4_K* x, float* y, int64_t nb);
void dequantize_q5_k(const BlockQ5_K* x, float* y, int64_t nb);
void dequantize_q6_k(const BlockQ6_K* x, float* y, int64_t nb);
void dequantize_q8_k(const BlockQ8_K* x, float* y, int64_t nb);

// Legacy quantizers: round to nearest with the block's natural scale; they
// ignore importance (one scale per 32 elements leaves little to search).
void quantize_q4_0(const float* x, BlockQ4_0* y, int64_t nb);
void quantize_q4_1(const float* x, BlockQ4_1* y, int64_t nb);
void quantize_q5_0(const float* x, BlockQ5_0* y, int64_t nb);
void quantize_q5_1(const float* x, BlockQ5_1* y, int64_t nb);
void quantize_q8_0(const float* x, BlockQ8_0* y, int64_t nb);
void quantize_q8_1(const float* x, BlockQ8_1* y, int64_t nb);
void quantize_q8_k(const float* x, BlockQ8_K* y, int64_t nb);

// K-quant quantizers; importance [nb * 256] or null.
void quantize_q2_k(const float* x, BlockQ2_K* y, int64_t nb, const float* importance);
void quantize_q3_k(const float* x, BlockQ3_K* y, int64_t nb, const float* importance);
void quantize_q4_k(const float* x, BlockQ4_K* y, int64_t nb, const float* importance);
void quantize_q5_k(const float* x, BlockQ5_K* y, int64_t nb, const float* importance);
void quantize_q6_k(const float* x, BlockQ6_K* y, int64_t nb, const float* importance);

// Round half away from zero (the rounding every quantizer here uses). The
// argument is first clamped to +-1e9 (NaN -> +1e9) so that non-finite
// input cannot make the float-to-int conversion undefined; callers clamp
// the result to their code range anyway.
inline int round_int(float v) {
  v = std::fmax(std::fmin(v, 1e9f), -1e9f);
  return static_cast<int>(v >= 0.0f ? v + 0.5f : v - 0.5f);
}

inline int clamp_int(int v, int lo, int hi) { return v < lo ? lo : (v > hi ? hi : v); }

// Symmetric fit x[i] ~ scale * q[i], q[i] in [-nmax, nmax - 1], minimising
// sum w[i] * (x[i] - scale * q[i])^2 over a few candidate scales refined by
// weighted least squares. Writes q (as q + nmax, i.e. 0..2*nmax-1) and
// returns scale (0 for an all-zero block). x, w, q: [n]. Cost O(n * 20).
float fit_symmetric(const float* x, const float* w, int n, int nmax, uint8_t* q);

// Asymmetric fit x[i] ~ scale * q[i] - min, q[i] in [0, nmax], min >= 0
// (the K-quant form: the offset can only pull values down). Minimises the
// weighted squared error as above. Writes q and *min; returns scale >= 0.
float fit_asymmetric(const float* x, const float* w, int n, int nmax, uint8_t* q, float* min);

// Per-element search weights for one sub-block: importance[i] if given,
// else 1. w: [n].
void search_weights(const float* importance, int n, float* w);

}  // namespace tokenmill::kernels::detail
