// AVX2 packed-panel GEMM (see gemm.h): the 8 x 8 transposing packer and the
// 16-row x 6-token outer-product micro-kernel.
#include <immintrin.h>

#include "kernels/avx2/avx2.h"
#include "kernels/avx2/math_avx2.h"
#include "kernels/gemm.h"
#include "kernels/x86/gemm_tiles.h"

namespace tokenmill::kernels::avx2 {
namespace {

constexpr int kTokens = 6;  // tokens per micro-kernel call: 12 accumulators

// y[t * ys + i] (+)= sum_{j < kn} wp[16 j + i] * x[t * xs + j] for i < 16
// (i < valid when kPartial), t < T. kFirst: y is written, not accumulated.
template <int T, bool kFirst, bool kPartial>
void micro(const float* wp, int64_t kn, const float* x, int64_t xs, float* y, int64_t ys, int64_t valid) {
  const __m256i m0 = tail_mask(valid < 8 ? valid : 8);
  const __m256i m1 = tail_mask(valid > 8 ? valid - 8 : 0);
  __m256 acc[T][2];
#pragma GCC unroll 6
  for (int t = 0; t < T; ++t) {
    if constexpr (kFirst) {
      acc[t][0] = _mm256_setzero_ps();
      acc[t][1] = _mm256_setzero_ps();
    } else if constexpr (kPartial) {
      acc[t][0] = _mm256_maskload_ps(y + t * ys, m0);
      acc[t][1] = _mm256_maskload_ps(y + t * ys + 8, m1);
    } else {
      acc[t][0] = _mm256_loadu_ps(y + t * ys);
      acc[t][1] = _mm256_loadu_ps(y + t * ys + 8);
    }
  }
  for (int64_t j = 0; j < kn; ++j) {
    const __m256 w0 = _mm256_load_ps(wp + 16 * j);
    const __m256 w1 = _mm256_load_ps(wp + 16 * j + 8);
#pragma GCC unroll 6
    for (int t = 0; t < T; ++t) {
      const __m256 xb = _mm256_broadcast_ss(x + t * xs + j);
      acc[t][0] = _mm256_fmadd_ps(w0, xb, acc[t][0]);
      acc[t][1] = _mm256_fmadd_ps(w1, xb, acc[t][1]);
    }
  }
#pragma GCC unroll 6
  for (int t = 0; t < T; ++t) {
    if constexpr (kPartial) {
      _mm256_maskstore_ps(y + t * ys, m0, acc[t][0]);
      _mm256_maskstore_ps(y + t * ys + 8, m1, acc[t][1]);
    } else {
      _mm256_storeu_ps(y + t * ys, acc[t][0]);
      _mm256_storeu_ps(y + t * ys + 8, acc[t][1]);
    }
  }
}

using MicroFn = void (*)(const float*, int64_t, const float*, int64_t, float*, int64_t, int64_t);

template <bool kFirst, bool kPartial>
constexpr MicroFn kMicro[kTokens] = {micro<1, kFirst, kPartial>, micro<2, kFirst, kPartial>,
                                     micro<3, kFirst, kPartial>, micro<4, kFirst, kPartial>,
                                     micro<5, kFirst, kPartial>, micro<6, kFirst, kPartial>};

MicroFn micro_for(int64_t tokens, bool first, bool partial) {
  if (first) return partial ? kMicro<true, true>[tokens - 1] : kMicro<true, false>[tokens - 1];
  return partial ? kMicro<false, true>[tokens - 1] : kMicro<false, false>[tokens - 1];
}

}  // namespace

void pack_rows(const float* src, int64_t src_stride, int64_t num_src, int64_t cols, int64_t row0, int64_t panel_rows,
               float* packed) {
  const int64_t group = row0 / kPackRows;
  const int64_t lane0 = row0 % kPackRows;
  for (int64_t k0 = 0; k0 < cols; k0 += kPackChunk) {
    const int64_t kn = cols - k0 < kPackChunk ? cols - k0 : kPackChunk;
    float* base = packed + k0 * panel_rows + group * kn * kPackRows + lane0;
    int64_t j = 0;
    for (; j + 8 <= kn; j += 8) {
      __m256 r[8];
      for (int i = 0; i < 8; ++i) {
        r[i] = i < num_src ? _mm256_loadu_ps(src + i * src_stride + k0 + j) : _mm256_setzero_ps();
      }
      transpose8(r);
      for (int i = 0; i < 8; ++i) _mm256_store_ps(base + (j + i) * kPackRows, r[i]);
    }
    for (; j < kn; ++j) {
      for (int i = 0; i < 8; ++i) base[j * kPackRows + i] = i < num_src ? src[i * src_stride + k0 + j] : 0.0f;
    }
  }
}

void gemm_packed(const float* packed, int64_t num_rows, int64_t cols, const float* x, int64_t x_stride,
                 int64_t num_tokens, float* y, int64_t y_stride) {
  for_each_f32_tile<kTokens>(
      packed, num_rows, cols, x, x_stride, num_tokens, y, y_stride,
      [&](const float* wp, int64_t kn, const float* xt, float* yt, int64_t valid, int64_t nt, bool first,
          bool partial) { micro_for(nt, first, partial)(wp, kn, xt, x_stride, yt, y_stride, valid); });
}

}  // namespace tokenmill::kernels::avx2
