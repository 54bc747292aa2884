// NEON FP32 panel product and activation quantizer (contracts in neon.h).
#include <arm_neon.h>

#include <algorithm>
#include <cmath>

#include "kernels/neon/neon.h"
#include "util/check.h"

namespace tokenmill::kernels::neon {
namespace {

// R rows x T tokens of y. Each output: a 4-lane FMA chain over the columns
// in steps of 4, its lanes summed pairwise, then the last cols % 4 columns
// by scalar FMAs in order; the same for every R and T, so results do not
// depend on the tiling.
template <int R, int T>
void tile(const float* w, int64_t w_stride, const float* x, int64_t x_stride, int64_t cols, float* y,
          int64_t y_stride) {
  float32x4_t acc[R][T];
  for (int r = 0; r < R; ++r) {
    for (int t = 0; t < T; ++t) acc[r][t] = vdupq_n_f32(0.0f);
  }
  int64_t c = 0;
  for (; c + 4 <= cols; c += 4) {
    float32x4_t wv[R];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) wv[r] = vld1q_f32(w + r * w_stride + c);
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
      const float32x4_t xv = vld1q_f32(x + t * x_stride + c);
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) acc[r][t] = vfmaq_f32(acc[r][t], wv[r], xv);
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int t = 0; t < T; ++t) {
      float s = vaddvq_f32(acc[r][t]);
      for (int64_t k = c; k < cols; ++k) s = std::fma(w[r * w_stride + k], x[t * x_stride + k], s);
      y[t * y_stride + r] = s;
    }
  }
}

using TileFn = void (*)(const float*, int64_t, const float*, int64_t, int64_t, float*, int64_t);

// kTiles[R - 1][T - 1] = tile<R, T>.
template <int R>
constexpr TileFn kRowTiles[4] = {tile<R, 1>, tile<R, 2>, tile<R, 3>, tile<R, 4>};
constexpr const TileFn* kTiles[4] = {kRowTiles<1>, kRowTiles<2>, kRowTiles<3>, kRowTiles<4>};

}  // namespace

void gemm_f32(const float* w, int64_t w_stride, int64_t num_rows, const float* x, int64_t x_stride, int64_t num_tokens,
              int64_t cols, float* y, int64_t y_stride) {
  for (int64_t r = 0; r < num_rows; r += 4) {
    const int64_t nr = std::min<int64_t>(4, num_rows - r);
    for (int64_t t = 0; t < num_tokens; t += 4) {
      const int64_t nt = std::min<int64_t>(4, num_tokens - t);
      kTiles[nr - 1][nt - 1](w + r * w_stride, w_stride, x + t * x_stride, x_stride, cols, y + t * y_stride + r,
                             y_stride);
    }
  }
}

void quantize_acts(const float* x, int64_t num_tokens, int64_t cols, const QuantizedActsOut& out) {
  TM_CHECK(cols % kActBlock == 0);
  const int64_t nb = num_tokens * cols / kActBlock;
  const float32x4_t lo = vdupq_n_f32(-32767.0f), hi = vdupq_n_f32(32767.0f);
  for (int64_t b = 0; b < nb; ++b) {
    const float* xb = x + b * kActBlock;
    float32x4_t v[8];
    float32x4_t m = vdupq_n_f32(0.0f);
    for (int i = 0; i < 8; ++i) {
      v[i] = vld1q_f32(xb + 4 * i);
      // maxnm skips NaN, as the reference's std::max(amax, |x|) does.
      m = vmaxnmq_f32(m, vabsq_f32(v[i]));
    }
    const float amax = vmaxnmvq_f32(m);
    const float id = amax > kActTiny ? 32767.0f / amax : 0.0f;
    int32x4_t sum[2] = {vdupq_n_s32(0), vdupq_n_s32(0)};
    for (int i = 0; i < 8; ++i) {
      // Round to nearest even, then clamp (maxnm / minnm: NaN becomes
      // -32767, as the reference's fmax / fmin give).
      const float32x4_t r = vminnmq_f32(vmaxnmq_f32(vrndnq_f32(vmulq_n_f32(v[i], id)), lo), hi);
      const int32x4_t q = vcvtq_s32_f32(r);
      vst1_s16(out.qs + b * kActBlock + 4 * i, vmovn_s32(q));
      sum[i / 4] = vaddq_s32(sum[i / 4], q);
    }
    const int32_t s0 = vaddvq_s32(sum[0]), s1 = vaddvq_s32(sum[1]);
    const float d = amax / 32767.0f;
    out.d[b] = d;
    out.s32[b] = d * static_cast<float>(s0 + s1);
    out.s16[2 * b] = d * static_cast<float>(s0);
    out.s16[2 * b + 1] = d * static_cast<float>(s1);
  }
}

}  // namespace tokenmill::kernels::neon
