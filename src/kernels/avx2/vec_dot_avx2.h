// The AVX2 row kernels of the integer decode path, shared by
// vec_dot_legacy_avx2.cc and vec_dot_k_avx2.cc and only by *_avx2.cc files
// (it needs -mavx2 -mfma -mf16c; everything has internal linkage, see
// dispatch.h).
//
// Work is done in groups of 256 columns (8 activation blocks; one K-quant
// super-block or 8 legacy blocks). For each 32-column sub-block the weights
// are widened to int16 and multiplied with the int16 activations by
// madd_epi16: 8 int32 partial sums. A tree of hadds turns the 8 sub-blocks'
// partial sums into one vector of 8 sub-block totals, which is converted
// once and scaled by a vector of 8 (weight scale x activation scale)
// products: per sub-block that costs about 1.2 operations instead of the
// convert, scale broadcast and FMA of a sub-block at a time. Types with a
// scale per 16 columns (Q2_K, Q3_K, Q6_K) keep the two madds of a sub-block
// apart and reduce 16 half-block totals. Offsets and minimums are added
// through the activation sums (s32 / s16), also 8 or 16 at a time.
//
// No int32 overflow: a total covers at most 32 products |w| * |q| with
// |w| <= 127 (Q8_0; 32 for Q6_K's signed 6 bits) and |q| <= 32767, so
// |total| <= 32 * 127 * 32767 < 2^31.
//
// Decoders (Q4_0 ... Q6_K in the two .cc files) provide:
//   kBlock, kBytes           elements and bytes of one block (32 or 256)
//   kHalves                  true: one float scale per 16 columns
//   kBias                    0, 16 or 32: granularity of the additive term
// and, for 32-element blocks (assembled into groups of 8 here, Ctx =
// LegacyGroup):
//   decode(b, w0, w1)        int16 values of elements 0..15 and 16..31
//                            (the block's fp16 scale is its first 2 bytes)
//   bias8(g, scale8)         additive coefficients of the 8 blocks at g
//   bias1(b, d)              the same for one block (kBias == 32)
// or, for 256-element super-blocks:
//   Ctx, prepare(b, ctx)     ctx.scale[kHalves ? 2 : 1] (__m256 of per-32 or
//                            per-16 float scales), ctx.bias[2] (kBias != 0)
//   decode(b, ctx, s, w0, w1)  sub-block s of 8
// so that  W_row . x = sum_k scale_k * d_a[k] * (w_k . q_a[k])
//                    + sum_k bias_k * s_a[k].
#pragma once

#include <immintrin.h>
#include <string.h>

#include <cstdint>

#include "kernels/avx2/avx2.h"
#include "kernels/avx2/math_avx2.h"
#include "kernels/gemm.h"
#include "kernels/q16_row_walk.h"
#include "kernels/quantize_act.h"

namespace tokenmill::kernels::avx2 {
namespace {  // NOLINT(build/namespaces): internal linkage on purpose

inline uint16_t load_u16(const uint8_t* p) {
  uint16_t v;
  memcpy(&v, p, 2);
  return v;
}

inline float fp16_to_f32(const uint8_t* p) { return _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(load_u16(p)))); }

inline __m256i madd_q(__m256i w, const int16_t* q) {
  return _mm256_madd_epi16(w, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q)));
}

// The 8 lane-sums of v[0..7] (each 8 int32 lanes), in order, in one vector.
struct Tree8 {
  __m256i l1[4];
  __m256i l2[2];
  // Feed v[2i] and v[2i + 1] for i = 0..3 in order.
  void add_pair(int i, __m256i a, __m256i b) {
    l1[i] = _mm256_hadd_epi32(a, b);
    if (i & 1) l2[i / 2] = _mm256_hadd_epi32(l1[i - 1], l1[i]);
  }
  __m256i totals() const {
    return _mm256_add_epi32(_mm256_permute2x128_si256(l2[0], l2[1], 0x20),
                            _mm256_permute2x128_si256(l2[0], l2[1], 0x31));
  }
};

// The 8 fp16 values at p, p + stride, ... p + 7 * stride as floats.
inline __m256 gather_fp16_8(const uint8_t* p, int64_t stride) {
  return _mm256_cvtph_ps(
      _mm_setr_epi16(static_cast<int16_t>(load_u16(p)), static_cast<int16_t>(load_u16(p + stride)),
                     static_cast<int16_t>(load_u16(p + 2 * stride)), static_cast<int16_t>(load_u16(p + 3 * stride)),
                     static_cast<int16_t>(load_u16(p + 4 * stride)), static_cast<int16_t>(load_u16(p + 5 * stride)),
                     static_cast<int16_t>(load_u16(p + 6 * stride)), static_cast<int16_t>(load_u16(p + 7 * stride))));
}

// Per-group weight-side data of 8 consecutive 32-element blocks: their
// scales (fp16 at the start of each block) and additive coefficients.
struct LegacyGroup {
  __m256 scale[1];
  __m256 bias[1];
};

template <class D>
inline void prepare_legacy(const uint8_t* g, LegacyGroup& c) {
  c.scale[0] = gather_fp16_8(g, D::kBytes);
  if constexpr (D::kBias == 32) c.bias[0] = D::bias8(g, c.scale[0]);
}

// The two helpers of q16_row below are forced inline: they are parts of it,
// apart only to be read, and must compile to the code of one function (the
// compiler's inlining limits could otherwise keep one out).

// The weight-side data of the group at gp: scales and additive terms.
template <class D>
[[gnu::always_inline]] inline void prepare_group(const uint8_t* gp, typename D::Ctx& c) {
  if constexpr (D::kBlock == 32) {
    prepare_legacy<D>(gp, c);
  } else {
    D::prepare(gp, c);
  }
}

// Legacy types: the blocks after the last whole group (cols % 256 != 0),
// one at a time, then y[t * ys] (a K-quant row has no such blocks).
template <class D, int T>
[[gnu::always_inline]] inline void finish_row(const uint8_t* row, int64_t cols, int64_t ngroups, const QuantizedActs& a,
                                              int64_t nb_act, __m256 (&acc)[T], float* y, int64_t ys) {
  if constexpr (D::kBlock == 32) {
    float bias_sum[T];
    for (int t = 0; t < T; ++t) bias_sum[t] = 0.0f;
    for (int64_t b = ngroups * 8; b < cols / 32; ++b) {
      const uint8_t* bp = row + b * D::kBytes;
      __m256i w0, w1;
      D::decode(bp, w0, w1);
      const float d = fp16_to_f32(bp);
      for (int t = 0; t < T; ++t) {
        const int16_t* q = a.qs + t * a.cols + 32 * b;
        const __m256i p = _mm256_add_epi32(madd_q(w0, q), madd_q(w1, q + 16));
        acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(d * a.d[t * nb_act + b]), acc[t]);
        if constexpr (D::kBias == 32) bias_sum[t] += D::bias1(bp, d) * a.s32[t * nb_act + b];
      }
    }
    for (int t = 0; t < T; ++t) y[t * ys] = hsum(acc[t]) + bias_sum[t];
  } else {
    for (int t = 0; t < T; ++t) y[t * ys] = hsum(acc[t]);
  }
}

// y[t * ys] = row . dequant(a[t]) for T tokens, row of `cols` weights.
template <class D, int T>
void q16_row(const uint8_t* row, int64_t cols, const QuantizedActs& a, float* y, int64_t ys) {
  constexpr int64_t kGroupBytes = 256 / D::kBlock * D::kBytes;
  constexpr int64_t kSubBytes = D::kBlock == 32 ? D::kBytes : 0;  // legacy: the next block
  const int64_t nb_act = a.cols / 32;
  __m256 acc[T];
  for (int t = 0; t < T; ++t) acc[t] = _mm256_setzero_ps();
  const int64_t ngroups = cols / 256;
  for (int64_t g = 0; g < ngroups; ++g) {
    const uint8_t* gp = row + g * kGroupBytes;
    typename D::Ctx c;
    prepare_group<D>(gp, c);
    Tree8 tree[T][D::kHalves ? 2 : 1];
    __m256i prev[T][2];
#pragma GCC unroll 8
    for (int s = 0; s < 8; ++s) {
      __m256i w0, w1;
      if constexpr (D::kBlock == 32) {
        D::decode(gp + s * kSubBytes, w0, w1);
      } else {
        D::decode(gp, c, s, w0, w1);
      }
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        const int16_t* q = a.qs + t * a.cols + 256 * g + 32 * s;
        const __m256i m0 = madd_q(w0, q);
        const __m256i m1 = madd_q(w1, q + 16);
        if constexpr (D::kHalves) {
          tree[t][s / 4].add_pair(s % 4, m0, m1);  // half-blocks 2s, 2s + 1
        } else if (s & 1) {
          tree[t][0].add_pair(s / 2, prev[t][0], _mm256_add_epi32(m0, m1));
        } else {
          prev[t][0] = _mm256_add_epi32(m0, m1);
        }
      }
    }
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
      const __m256 da = _mm256_loadu_ps(a.d + t * nb_act + 8 * g);
      if constexpr (D::kHalves) {
        // Half-block k uses the scale of activation block k / 2.
        const __m256 da_lo = _mm256_permutevar8x32_ps(da, _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3));
        const __m256 da_hi = _mm256_permutevar8x32_ps(da, _mm256_setr_epi32(4, 4, 5, 5, 6, 6, 7, 7));
        acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(tree[t][0].totals()), _mm256_mul_ps(c.scale[0], da_lo), acc[t]);
        acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(tree[t][1].totals()), _mm256_mul_ps(c.scale[1], da_hi), acc[t]);
      } else {
        acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(tree[t][0].totals()), _mm256_mul_ps(c.scale[0], da), acc[t]);
      }
      if constexpr (D::kBias == 32) {
        acc[t] = _mm256_fmadd_ps(c.bias[0], _mm256_loadu_ps(a.s32 + t * nb_act + 8 * g), acc[t]);
      } else if constexpr (D::kBias == 16) {
        acc[t] = _mm256_fmadd_ps(c.bias[0], _mm256_loadu_ps(a.s16 + t * 2 * nb_act + 16 * g), acc[t]);
        acc[t] = _mm256_fmadd_ps(c.bias[1], _mm256_loadu_ps(a.s16 + t * 2 * nb_act + 16 * g + 8), acc[t]);
      }
    }
  }
  finish_row<D, T>(row, cols, ngroups, a, nb_act, acc, y, ys);
}

// One row widened for the packed prefill kernel (gemm.h): q [cols] int16
// values as the row kernel multiplies them, and per 16 columns the float
// scale and additive coefficient (a per-32 value repeated for both halves).
// TypeKernels::q16_decode_row for type D::kType.
template <class D>
void q16_decode_row_of(const void* row_bytes, int64_t cols, int16_t* q, float* scale16, float* bias16) {
  static_assert(Q16Layout{D::kHalves, D::kBias} == q16_layout(D::kType), "decoder disagrees with q16_layout");
  const auto* row = static_cast<const uint8_t*>(row_bytes);
  if constexpr (D::kBlock == 32) {
    for (int64_t b = 0; b < cols / 32; ++b) {
      const uint8_t* bp = row + b * D::kBytes;
      __m256i w0, w1;
      D::decode(bp, w0, w1);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + 32 * b), w0);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + 32 * b + 16), w1);
      const float d = fp16_to_f32(bp);
      const float bias = D::kBias == 32 ? D::bias1(bp, d) : 0.0f;
      scale16[2 * b] = scale16[2 * b + 1] = d;
      bias16[2 * b] = bias16[2 * b + 1] = bias;
    }
  } else {
    for (int64_t g = 0; g < cols / 256; ++g) {
      const uint8_t* gp = row + g * D::kBytes;
      typename D::Ctx c;
      D::prepare(gp, c);
      alignas(32) float sc[16], bi[16];
      _mm256_store_ps(sc, c.scale[0]);
      if constexpr (D::kHalves) _mm256_store_ps(sc + 8, c.scale[D::kHalves ? 1 : 0]);
      if constexpr (D::kBias != 0) {
        _mm256_store_ps(bi, c.bias[0]);
        if constexpr (D::kBias == 16) _mm256_store_ps(bi + 8, c.bias[D::kBias == 16 ? 1 : 0]);
      }
      for (int k = 0; k < 16; ++k) {
        scale16[16 * g + k] = D::kHalves ? sc[k] : sc[k / 2];
        bias16[16 * g + k] = D::kBias == 0 ? 0.0f : D::kBias == 16 ? bi[k] : bi[k / 2];
      }
      for (int s = 0; s < 8; ++s) {
        __m256i w0, w1;
        D::decode(gp, c, s, w0, w1);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + 256 * g + 32 * s), w0);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + 256 * g + 32 * s + 16), w1);
      }
    }
  }
}

// TypeKernels::q16_rows for type D::kType: rows [r0, r1) of w for
// num_tokens <= kMaxQ16RowTokens tokens of a; y[t * w.rows + r].
template <class D>
void q16_rows_of(const WeightView& w, int64_t r0, int64_t r1, const QuantizedActs& a, int64_t num_tokens, float* y) {
  static_assert(Q16Layout{D::kHalves, D::kBias} == q16_layout(D::kType), "decoder disagrees with q16_layout");
  walk_q16_rows(static_cast<const uint8_t*>(w.data), w.cols / D::kBlock * D::kBytes, w.rows, w.cols, r0, r1, a,
                num_tokens, y, []<int T>(const uint8_t* r, int64_t c, const QuantizedActs& at, float* yt, int64_t ys) {
                  q16_row<D, T>(r, c, at, yt, ys);
                });
}

}  // namespace
}  // namespace tokenmill::kernels::avx2
