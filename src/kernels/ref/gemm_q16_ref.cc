// The int16 GEMM's numerics in scalar code (gemm.h: gemm_q16_ref). The
// packed and interleaved kernels keep their integer sums exact and do the
// same few float steps in the same order, so this is an exact reference for
// them, not an approximate one: tests compare bit for bit.
#include <cmath>

#include "kernels/gemm.h"

namespace tokenmill::kernels {
namespace {

// One output: row r of the decoded rows times token t of a. Per 32-column
// block, the exact integer sum of each scale unit (the block, or each of
// its 16-column halves) is converted and multiplied by (scale * d_token)
// into acc with one fma; then come the block's additive terms, also fmas.
// std::fma rounds once whatever the CPU, as the kernels' FMA instructions do.
float q16_dot_ref(const int16_t* w, const float* scale16, const float* bias16, Q16Layout layout, int64_t cols,
                  const QuantizedActs& a, int64_t t) {
  const int64_t nb = cols / 32;
  const int16_t* q = a.qs + t * cols;
  float acc = 0.0f;
  for (int64_t b = 0; b < nb; ++b) {
    int32_t half[2] = {0, 0};
    for (int64_t c = 0; c < 32; ++c) half[c / 16] += int32_t{w[32 * b + c]} * q[32 * b + c];
    const float d = a.d[t * nb + b];
    if (layout.halves) {
      acc = std::fma(static_cast<float>(half[0]), scale16[2 * b] * d, acc);
      acc = std::fma(static_cast<float>(half[1]), scale16[2 * b + 1] * d, acc);
    } else {
      acc = std::fma(static_cast<float>(half[0] + half[1]), scale16[2 * b] * d, acc);
    }
    if (layout.bias == 32) acc = std::fma(bias16[2 * b], a.s32[t * nb + b], acc);
    if (layout.bias == 16) {
      acc = std::fma(bias16[2 * b], a.s16[t * 2 * nb + 2 * b], acc);
      acc = std::fma(bias16[2 * b + 1], a.s16[t * 2 * nb + 2 * b + 1], acc);
    }
  }
  return acc;
}

}  // namespace

void gemm_q16_ref(const int16_t* q, const float* scale16, const float* bias16, Q16Layout layout, int64_t num_rows,
                  int64_t cols, const QuantizedActs& a, int64_t num_tokens, float* y, int64_t y_stride) {
  const int64_t halves = cols / 16;
  for (int64_t t = 0; t < num_tokens; ++t) {
    for (int64_t r = 0; r < num_rows; ++r) {
      y[t * y_stride + r] = q16_dot_ref(q + r * cols, scale16 + r * halves, bias16 + r * halves, layout, cols, a, t);
    }
  }
}

}  // namespace tokenmill::kernels
