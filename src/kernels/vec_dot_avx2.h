// The generic AVX2 row kernel of the integer decode path, shared by
// vec_dot_legacy_avx2.cc and vec_dot_k_avx2.cc and only by *_avx2.cc files
// (it needs -mavx2 -mfma -mf16c; everything has internal linkage, see
// dispatch.h).
//
// A weight type plugs in as a decoder D with:
//   kBlock, kBytes          elements and bytes of one block
//   kBias                   0, 16 or 32: granularity of an additive term
//                           (offset or minimum) that multiplies the
//                           activation sums s16 / s32
//   Ctx, prepare(b, ctx)    per-block unpacking (scales, minimums)
//   decode(b, ctx, s, w0, w1)  int16 weights of sub-block s (32 elements;
//                           w0 = elements 0..15, w1 = 16..31) with any
//                           integer sub-scale folded in
//   scale(ctx, s)           float factor of sub-block s's integer products
//   bias(ctx, k)            the additive coefficient of unit k (kBias != 0)
// so that  W_row . x = sum_s scale_s * d_a[s] * (w_s . q_a[s])
//                    + sum_k bias_k * s_a[k].
#pragma once

#include <immintrin.h>
#include <string.h>

#include <cstdint>

#include "kernels/math_avx2.h"
#include "kernels/quantize_act.h"

namespace tokenmill::kernels::avx2 {
namespace {  // NOLINT(build/namespaces): internal linkage on purpose

inline float fp16_to_f32(const uint8_t* p) {
  uint16_t h;
  memcpy(&h, p, 2);
  return _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(h)));
}

// The most tokens one call of the row kernel handles.
constexpr int kMaxRowTokens = 4;

// Sum over 32 elements of w * q as 8 int32 lanes. No overflow: |w| <= 4096
// (Q6_K's 6-bit value times its 8-bit scale) and |q| <= 32767 give at most
// 4 * 4096 * 32767 < 2^31 per lane.
inline __m256i dot32(__m256i w0, __m256i w1, const int16_t* q) {
  return _mm256_add_epi32(_mm256_madd_epi16(w0, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q))),
                          _mm256_madd_epi16(w1, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 16))));
}

// y[t * ys] = row . dequant(a[t]) for T tokens of `a`, row of `cols` weights.
// Two accumulators per token (even and odd sub-blocks) hide the FMA latency.
template <class D, int T>
void q16_row(const uint8_t* row, int64_t cols, const QuantizedActs& a, float* y, int64_t ys) {
  constexpr int kSub = static_cast<int>(D::kBlock / 32);
  const int64_t nb_act = a.cols / 32;
  __m256 acc[T][2];
  float corr[T];
  for (int t = 0; t < T; ++t) {
    acc[t][0] = _mm256_setzero_ps();
    acc[t][1] = _mm256_setzero_ps();
    corr[t] = 0.0f;
  }
  const int64_t nblocks = cols / D::kBlock;
  for (int64_t b = 0; b < nblocks; ++b) {
    const uint8_t* blk = row + b * D::kBytes;
    typename D::Ctx ctx;
    D::prepare(blk, ctx);
#pragma GCC unroll 8
    for (int s = 0; s < kSub; ++s) {
      __m256i w0, w1;
      D::decode(blk, ctx, s, w0, w1);
      const float sc = D::scale(ctx, s);
      const int64_t j = b * kSub + s;  // activation block
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        const __m256i p = dot32(w0, w1, a.qs + t * a.cols + 32 * j);
        const __m256 f = _mm256_set1_ps(sc * a.d[t * nb_act + j]);
        acc[t][s & 1] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), f, acc[t][s & 1]);
      }
    }
    if constexpr (D::kBias == 32) {
      for (int s = 0; s < kSub; ++s) {
        const float bias = D::bias(ctx, s);
        for (int t = 0; t < T; ++t) corr[t] += bias * a.s32[t * nb_act + b * kSub + s];
      }
    } else if constexpr (D::kBias == 16) {
      for (int k = 0; k < 2 * kSub; ++k) {
        const float bias = D::bias(ctx, k);
        for (int t = 0; t < T; ++t) corr[t] += bias * a.s16[t * 2 * nb_act + b * 2 * kSub + k];
      }
    }
  }
  for (int t = 0; t < T; ++t) y[t * ys] = hsum(_mm256_add_ps(acc[t][0], acc[t][1])) + corr[t];
}

// Rows [r0, r1) of w (type D) for num_tokens <= kMaxRowTokens tokens of a;
// y[t * w.rows + r]. `rows`/`cols` are the matrix shape.
template <class D>
void q16_rows(const uint8_t* data, int64_t rows, int64_t cols, int64_t r0, int64_t r1,
              const QuantizedActs& a, int64_t num_tokens, float* y) {
  const int64_t row_bytes = cols / D::kBlock * D::kBytes;
  for (int64_t r = r0; r < r1; ++r) {
    const uint8_t* row = data + r * row_bytes;
    switch (num_tokens) {
      case 1: q16_row<D, 1>(row, cols, a, y + r, rows); break;
      case 2: q16_row<D, 2>(row, cols, a, y + r, rows); break;
      case 3: q16_row<D, 3>(row, cols, a, y + r, rows); break;
      default: q16_row<D, 4>(row, cols, a, y + r, rows); break;
    }
  }
}

}  // namespace
}  // namespace tokenmill::kernels::avx2
