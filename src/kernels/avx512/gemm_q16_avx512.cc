// AVX-512 (F, BW, VNNI) version of the int16 packed-panel GEMM micro-kernel
// (gemm.h, gemm_q16_avx2.cc): the same packed layout and the same numerics,
// bit for bit. One 512-bit vector holds a column pair of all 16 rows of a
// group (the two 256-bit vectors of the AVX2 kernel, which lie side by side
// in the panel), so each token needs one vpdpwssd per column pair where the
// AVX2 kernel issues two madd_epi16 and two add_epi32. The integer multiply
// pipes bound the AVX2 kernel (its VNNI form measured no faster); Zen 4/5
// and Intel cores since Ice Lake run the 512-bit form at the same rate, with
// twice the products each. 32 registers allow 6 tokens per tile.
//
// Integer sums per block are exact (as in the AVX2 kernel), and each
// output's float operations (convert, scale x activation scale, FMA; bias
// FMAs) are the same per lane in the same order, so the results equal the
// AVX2 kernel's exactly.
#include <immintrin.h>

#include "kernels/avx512/avx512.h"
#include "kernels/avx512/math_avx512.h"
#include "kernels/gemm.h"
#include "kernels/x86/gemm_tiles.h"

namespace tokenmill::kernels::avx512 {
namespace {

constexpr int kTokens = 6;  // 6 int32 + 6 float accumulators

using MicroArgs = Q16MicroArgs;

template <int T>
inline void flush(const MicroArgs& m, int64_t h, int64_t b, __m512i sums[T], __m512 acc[T]) {
  const __m512 s = _mm512_loadu_ps(m.scale + h * m.panel_rows);
#pragma GCC unroll 6
  for (int t = 0; t < T; ++t) {
    const __m512 d = _mm512_set1_ps(m.d[t * m.act_blocks + b]);
    acc[t] = _mm512_fmadd_ps(to_float(sums[t]), _mm512_mul_ps(s, d), acc[t]);
    sums[t] = _mm512_setzero_si512();
  }
}

template <int T>
inline void add_bias(const MicroArgs& m, int64_t h, const float* s, int64_t s_stride, __m512 acc[T]) {
  const __m512 bv = _mm512_loadu_ps(m.bias + h * m.panel_rows);
#pragma GCC unroll 6
  for (int t = 0; t < T; ++t) acc[t] = _mm512_fmadd_ps(bv, _mm512_set1_ps(s[t * s_stride]), acc[t]);
}

template <int T, bool kFirst, bool kPartial, bool kHalves, int kBias>
void micro(const MicroArgs& m) {
  const __mmask16 mask = row_mask(m.valid);
  __m512 acc[T];
  load_tile<T, kFirst, kPartial>(m.y, m.y_stride, mask, acc);
  __m512i sums[T];
#pragma GCC unroll 6
  for (int t = 0; t < T; ++t) sums[t] = _mm512_setzero_si512();
  for (int64_t b = 0; b < m.num_blocks; ++b) {
    const int16_t* wb = m.w + b * 16 * 32;
#pragma GCC unroll 16
    for (int j = 0; j < 16; ++j) {
      const __m512i w = _mm512_load_si512(wb + 32 * j);
#pragma GCC unroll 6
      for (int t = 0; t < T; ++t) {
        sums[t] = _mm512_dpwssd_epi32(sums[t], w, bcast_pair(m.q + t * m.q_stride + 32 * b + 2 * j));
      }
      if (kHalves && j == 7) flush<T>(m, 2 * b, b, sums, acc);
    }
    flush<T>(m, kHalves ? 2 * b + 1 : 2 * b, b, sums, acc);
    if constexpr (kBias == 32) {
      add_bias<T>(m, 2 * b, m.s32 + b, m.act_blocks, acc);
    } else if constexpr (kBias == 16) {
      add_bias<T>(m, 2 * b, m.s16 + 2 * b, 2 * m.act_blocks, acc);
      add_bias<T>(m, 2 * b + 1, m.s16 + 2 * b + 1, 2 * m.act_blocks, acc);
    }
  }
  store_tile<T, kPartial>(m.y, m.y_stride, mask, acc);
}

using MicroFn = void (*)(const MicroArgs&);

template <bool kFirst, bool kPartial, bool kHalves, int kBias>
constexpr MicroFn kByTokens[kTokens] = {
    micro<1, kFirst, kPartial, kHalves, kBias>, micro<2, kFirst, kPartial, kHalves, kBias>,
    micro<3, kFirst, kPartial, kHalves, kBias>, micro<4, kFirst, kPartial, kHalves, kBias>,
    micro<5, kFirst, kPartial, kHalves, kBias>, micro<6, kFirst, kPartial, kHalves, kBias>};

template <bool kHalves, int kBias>
MicroFn micro_for(int64_t tokens, bool first, bool partial) {
  if (first)
    return partial ? kByTokens<true, true, kHalves, kBias>[tokens - 1]
                   : kByTokens<true, false, kHalves, kBias>[tokens - 1];
  return partial ? kByTokens<false, true, kHalves, kBias>[tokens - 1]
                 : kByTokens<false, false, kHalves, kBias>[tokens - 1];
}

MicroFn micro_for(bool halves, int bias, int64_t tokens, bool first, bool partial) {
  if (halves)
    return bias == 16 ? micro_for<true, 16>(tokens, first, partial) : micro_for<true, 0>(tokens, first, partial);
  return bias == 32 ? micro_for<false, 32>(tokens, first, partial) : micro_for<false, 0>(tokens, first, partial);
}

}  // namespace

void gemm_q16_packed(const int16_t* packed_q, const float* packed_scale, const float* packed_bias, bool halves,
                     int bias, int64_t num_rows, int64_t cols, const QuantizedActs& a, int64_t num_tokens, float* y,
                     int64_t y_stride) {
  for_each_q16_tile<kTokens>(packed_q, packed_scale, packed_bias, num_rows, cols, a, num_tokens, y, y_stride,
                             [&](const MicroArgs& m, int64_t nt, bool first, bool partial) {
                               micro_for(halves, bias, nt, first, partial)(m);
                             });
}

}  // namespace tokenmill::kernels::avx512
