// AVX2 products of weights interleaved at load (interleave.h: Q4_0 x 16,
// Q5_0 x 16, Q8_0 x 16, Q4_K x 16, Q6_K x 16) with int16 activations (quantize_act.h):
// decode, batched decode and prefill, with no per-call packing or decoding.
// The same layouts as the AVX-512 kernels (gemm_interleaved_avx512.cc): a
// 32-byte segment holds a column pair of the 16 rows, bytes 0-15 for rows
// 0-7 and 16-31 for rows 8-15, so each half widened to int16 is one vector
// of 8 rows' pairs and madd_epi16 against the token's broadcast activation
// pair gives one int32 lane per row: 16 rows x up to 3 tokens of
// accumulators, no horizontal sums.
//
// Numerics: per 32-column block (Q6_K: 16-column half) the integer sums are
// exact; then acc += float(sum) * (scale * d_act) and acc += bias * s32_act,
// block after block, with the scale and bias computed as the row decoders
// compute them (Q4_0: d and -8 d; Q5_0: d and -16 d; Q4_K: sc * d and m * (0 - dmin); Q6_K:
// sc * d). So the results equal gemm_q16_packed's and the AVX-512 kernels'
// bit for bit (and the scalar reference gemm_q16_ref, gemm.h).
#include <immintrin.h>

#include "kernels/avx2/avx2.h"
#include "kernels/avx2/math_avx2.h"
#include "kernels/gemm.h"
#include "kernels/interleave.h"
#include "kernels/x86/gemm_interleaved_walk.h"

namespace tokenmill::kernels::avx2 {
namespace {

// 6 float accumulators, 6 int32 sums, the widened weights and a broadcast
// fit the 16 vector registers.
constexpr int kTokens = 3;
// Decode prefetch distance along a row, in bytes (see the AVX-512 kernels).
// Q8_0 streams best two units (1 088 bytes) ahead on a Zen 2 core: 7 %
// faster decode than 4.6 KB, while three units were 8 % slower and Q4_0 and
// Q5_0 showed no such optimum (docs/benchmarks.md, "Decode prefetch").
template <gguf::TensorType L>
constexpr int64_t kDecodePrefetchBytes =
    L == gguf::TensorType::Q8_0 ? 2 * kInterleavedUnitBytes<L> : 16 * kQ4_0x16BlockBytes;

// Prefetches the `bytes` at p (lines of the unit m.prefetch bytes ahead).
// Decode (one tile) reads each weight line once, so non-temporally: on a
// Zen 2 core (EPYC Rome) the interleaved GEMVs streamed more bytes per second so
// (docs/benchmarks.md, "Decode prefetch"). Several tiles read a chunk again
// from L1, where a line marked for early eviction would have to come back
// from DRAM: the default hint there. Inline assembly because GCC 12 dropped
// the _mm_prefetch(p, _MM_HINT_NTA) of this branch (no instruction emitted).
inline void prefetch_unit(const InterleavedArgs& m, const uint8_t* p, int64_t bytes) {
  if (m.once) {
    for (int64_t line = 0; line < bytes; line += 64) __asm__ volatile("prefetchnta %0" : : "m"(p[line]));
  } else {
    prefetch_lines(p, bytes);
  }
}

// Half h (rows 8 h .. 8 h + 7) of the 32-byte segment at p, widened to int16.
inline __m256i widen_u8(const uint8_t* p) {
  return _mm256_cvtepu8_epi16(_mm_load_si128(reinterpret_cast<const __m128i*>(p)));
}
inline __m256i widen_s8(const uint8_t* p) {
  return _mm256_cvtepi8_epi16(_mm_load_si128(reinterpret_cast<const __m128i*>(p)));
}

// 8 fp16 values / unsigned bytes / signed bytes (one per row) as floats.
inline __m256 fp16x8(const uint8_t* p) { return _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(p))); }
inline __m256 u8x8(const uint8_t* p) {
  return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
}
inline __m256 s8x8(const uint8_t* p) {
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
}

// A per-row float of the 16 rows of a group: rows 0-7, rows 8-15.
struct RowPair {
  __m256 r[2];
};

template <int T>
inline void clear(__m256i (&sums)[T][2]) {
#pragma GCC unroll 3
  for (int t = 0; t < T; ++t) sums[t][0] = sums[t][1] = _mm256_setzero_si256();
}

// sums[t][h] += w[h] . (token t's activation pair at column col).
template <int T>
inline void dot_pair(const InterleavedArgs& m, const __m256i (&w)[2], int64_t col, __m256i (&sums)[T][2]) {
#pragma GCC unroll 3
  for (int t = 0; t < T; ++t) {
    const __m256i a = bcast_pair(m.q + t * m.q_stride + col);
    sums[t][0] = _mm256_add_epi32(sums[t][0], _mm256_madd_epi16(w[0], a));
    sums[t][1] = _mm256_add_epi32(sums[t][1], _mm256_madd_epi16(w[1], a));
  }
}

// acc[t] += float(sums[t]) * (scale * d_act) [+ bias * s32_act], for the
// activation block blk.
template <int T, bool kBias>
inline void flush(const InterleavedArgs& m, int64_t blk, const __m256i (&sums)[T][2], const RowPair& scale,
                  const RowPair& bias, __m256 (&acc)[T][2]) {
#pragma GCC unroll 3
  for (int t = 0; t < T; ++t) {
    const __m256 dt = _mm256_broadcast_ss(m.d + t * m.act_blocks + blk);
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      acc[t][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums[t][h]), _mm256_mul_ps(scale.r[h], dt), acc[t][h]);
      if constexpr (kBias) {
        acc[t][h] = _mm256_fmadd_ps(bias.r[h], _mm256_broadcast_ss(m.s32 + t * m.act_blocks + blk), acc[t][h]);
      }
    }
  }
}

// flush for the legacy types with an offset: the 16 rows' fp16 scales d at
// `scales`, the additive term -offset d (Q4_0: 8, Q5_0: 16).
template <int T>
inline void flush_offset(const InterleavedArgs& m, int64_t blk, const __m256i (&sums)[T][2], const uint8_t* scales,
                         float offset, __m256 (&acc)[T][2]) {
  const RowPair scale{{fp16x8(scales), fp16x8(scales + 16)}};
  const __m256 minus = _mm256_set1_ps(-offset);
  const RowPair bias{{_mm256_mul_ps(scale.r[0], minus), _mm256_mul_ps(scale.r[1], minus)}};
  flush<T, true>(m, blk, sums, scale, bias, acc);
}

// Sums of the n column pairs of the n 32-byte segments at seg: the low
// nibbles into sa (pair p at activation column qa + 2 p) when kLow, the high
// ones into sb (at qb + 2 p) when kHigh. sa and sb may be the same sums.
template <int T, bool kLow, bool kHigh>
inline void nibble_pairs(const InterleavedArgs& m, const uint8_t* seg, int n, int64_t qa, int64_t qb,
                         __m256i (&sa)[T][2], __m256i (&sb)[T][2]) {
  const __m256i low4 = _mm256_set1_epi16(15);
#pragma GCC unroll 16
  for (int p = 0; p < n; ++p) {
    __m256i lo[2], hi[2];
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      const __m256i v = widen_u8(seg + 32 * p + 16 * h);
      lo[h] = _mm256_and_si256(v, low4);
      hi[h] = _mm256_srli_epi16(v, 4);
    }
    if constexpr (kLow) dot_pair<T>(m, lo, qa + 2 * p, sa);
    if constexpr (kHigh) dot_pair<T>(m, hi, qb + 2 * p, sb);
  }
}

// Q4_0 x 16, one 32-column block per unit: segment p holds pairs p (low
// nibbles) and p + 8 (high) of the same block.
template <int T>
inline void q4_0_unit(const InterleavedArgs& m, int64_t u, __m256 (&acc)[T][2]) {
  const uint8_t* bp = m.w + u * kQ4_0x16BlockBytes;
  prefetch_unit(m, bp + m.prefetch, kQ4_0x16BlockBytes);
  __m256i sums[T][2];
  clear(sums);
  nibble_pairs<T, true, true>(m, bp, 8, 32 * u, 32 * u + 16, sums, sums);
  flush_offset<T>(m, u, sums, bp + 256, 8.0f, acc);
}

// Q5_0 x 16, one 32-column block per unit: segment p holds the nibbles of
// pairs p and p + 8 as in Q4_0; their fifth bits sit in high-bit segment
// p / 4 at bits 2 (p % 4) and 2 (p % 4) + 1, moved to bit 4 by shifting
// that segment right by 2 after each pair (constant shifts only). The
// values are put together in int16 lanes after widening: doing it on the
// 32 bytes first and widening after (one extract per half) was 5-25 %
// slower (kernels_bench Gemm/6/2048/640, one thread).
template <int T>
inline void q5_0_unit(const InterleavedArgs& m, int64_t u, __m256 (&acc)[T][2]) {
  const uint8_t* bp = m.w + u * kQ5_0x16BlockBytes;
  prefetch_unit(m, bp + m.prefetch, kQ5_0x16BlockBytes);
  __m256i sums[T][2];
  clear(sums);
  const __m256i low4 = _mm256_set1_epi16(15);
  const __m256i bit4 = _mm256_set1_epi16(16);
  const int64_t col = 32 * u;
#pragma GCC unroll 2
  for (int s = 0; s < 2; ++s) {
    __m256i hb[2] = {widen_u8(bp + kQ5_0x16HighBits + 32 * s), widen_u8(bp + kQ5_0x16HighBits + 32 * s + 16)};
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) {
      const int p = 4 * s + k;
      __m256i lo[2], hi[2];
#pragma GCC unroll 2
      for (int h = 0; h < 2; ++h) {
        const __m256i v = widen_u8(bp + 32 * p + 16 * h);
        lo[h] = _mm256_or_si256(_mm256_and_si256(v, low4), _mm256_and_si256(_mm256_slli_epi16(hb[h], 4), bit4));
        hi[h] = _mm256_or_si256(_mm256_srli_epi16(v, 4), _mm256_and_si256(_mm256_slli_epi16(hb[h], 3), bit4));
        hb[h] = _mm256_srli_epi16(hb[h], 2);
      }
      dot_pair<T>(m, lo, col + 2 * p, sums);
      dot_pair<T>(m, hi, col + 16 + 2 * p, sums);
    }
  }
  flush_offset<T>(m, u, sums, bp + kQ5_0x16HighBits + 64, 16.0f, acc);
}

// Q8_0 x 16, one 32-column block per unit: segment p, sign-extended, is
// column pair p of the 16 rows.
template <int T>
inline void q8_0_unit(const InterleavedArgs& m, int64_t u, __m256 (&acc)[T][2]) {
  const uint8_t* bp = m.w + u * kQ8_0x16BlockBytes;
  prefetch_unit(m, bp + m.prefetch, kQ8_0x16BlockBytes);
  __m256i sums[T][2];
  clear(sums);
#pragma GCC unroll 16
  for (int p = 0; p < 16; ++p) {
    const __m256i w[2] = {widen_s8(bp + 32 * p), widen_s8(bp + 32 * p + 16)};
    dot_pair<T>(m, w, 32 * u + 2 * p, sums);
  }
  const RowPair scale{{fp16x8(bp + 512), fp16x8(bp + 528)}};
  flush<T, false>(m, u, sums, scale, scale, acc);
}

// Q4_K x 16, one 256-column super-block per unit: for each pair k of
// sub-blocks, segment p holds pair p of sub-block 2 k (low nibbles) and of
// 2 k + 1 (high). From 3 tokens on the two sub-blocks are summed one after
// the other (the segments read twice, from L1), so that one set of sums
// fits the registers.
template <int T>
inline void q4_k_unit(const InterleavedArgs& m, int64_t u, __m256 (&acc)[T][2]) {
  const uint8_t* bp = m.w + u * kQ4_Kx16BlockBytes;
  const uint8_t* sc = bp + kQ4_Kx16Scales + 64;
  const uint8_t* mn = sc + 128;
  const RowPair d{{fp16x8(bp + kQ4_Kx16Scales), fp16x8(bp + kQ4_Kx16Scales + 16)}};
  const __m256 zero = _mm256_setzero_ps();
  const RowPair neg_dmin{
      {_mm256_sub_ps(zero, fp16x8(bp + kQ4_Kx16Scales + 32)), _mm256_sub_ps(zero, fp16x8(bp + kQ4_Kx16Scales + 48))}};
  const auto sub_block = [&](int j, const __m256i(&sums)[T][2]) {
    const RowPair scale{{_mm256_mul_ps(u8x8(sc + 16 * j), d.r[0]), _mm256_mul_ps(u8x8(sc + 16 * j + 8), d.r[1])}};
    const RowPair bias{
        {_mm256_mul_ps(u8x8(mn + 16 * j), neg_dmin.r[0]), _mm256_mul_ps(u8x8(mn + 16 * j + 8), neg_dmin.r[1])}};
    flush<T, true>(m, 8 * u + j, sums, scale, bias, acc);
  };
  for (int k = 0; k < 4; ++k) {
    // The next unit's bytes, a quarter per sub-block pair (its scales sit
    // 2 KB past its quants, where the hardware prefetcher arrives late).
    prefetch_unit(m, bp + m.prefetch + k * (kQ4_Kx16BlockBytes / 4), kQ4_Kx16BlockBytes / 4);
    const uint8_t* seg = bp + 512 * k;
    const int64_t col = 256 * u + 64 * k;
    if constexpr (T <= 2) {
      // Both sub-blocks' sums fit the registers: one pass, each segment
      // loaded and widened once.
      __m256i sa[T][2], sb[T][2];
      clear(sa);
      clear(sb);
      nibble_pairs<T, true, true>(m, seg, 16, col, col + 32, sa, sb);
      sub_block(2 * k, sa);
      sub_block(2 * k + 1, sb);
    } else {
      __m256i sums[T][2];
      clear(sums);
      nibble_pairs<T, true, false>(m, seg, 16, col, col + 32, sums, sums);
      sub_block(2 * k, sums);
      clear(sums);
      nibble_pairs<T, false, true>(m, seg, 16, col, col + 32, sums, sums);
      sub_block(2 * k + 1, sums);
    }
  }
}

// Q6_K x 16, one 256-column super-block per unit: per 32-column block, 8
// segments of low 4 bits (pairs p and p + 8) and 4 of high 2 bits (pairs
// 2 s, 2 s + 8, 2 s + 1, 2 s + 9); each pair becomes q - 32 in int16 lanes.
// The block's two 16-column halves, each with its own scale, are summed one
// after the other (as Q4_K's sub-blocks); no additive term.
template <int T>
inline void q6_k_unit(const InterleavedArgs& m, int64_t u, __m256 (&acc)[T][2]) {
  const uint8_t* bp = m.w + u * kQ6_Kx16BlockBytes;
  const RowPair d{{fp16x8(bp + kQ6_Kx16Scales + 256), fp16x8(bp + kQ6_Kx16Scales + 272)}};
  const __m256i low4 = _mm256_set1_epi16(15);
  const __m256i high2 = _mm256_set1_epi16(0x30);
  const __m256i offset = _mm256_set1_epi16(32);
  // q - 32 from low bits `lo` (already masked) and high bits at 4-5 of `hi`
  // (other bits ignored).
  const auto value = [&](__m256i lo, __m256i hi) {
    return _mm256_sub_epi16(_mm256_or_si256(lo, _mm256_and_si256(hi, high2)), offset);
  };
  for (int64_t j = 0; j < 8; ++j) {
    // The next unit's bytes, an eighth per block (see q4_k_unit).
    prefetch_unit(m, bp + m.prefetch + j * (kQ6_Kx16BlockBytes / 8), kQ6_Kx16BlockBytes / 8);
    const uint8_t* blk = bp + 384 * j;
    const int64_t col = 256 * u + 32 * j;
    const uint8_t* sc = bp + kQ6_Kx16Scales + 32 * j;
    for (int half = 0; half < 2; ++half) {
      __m256i sums[T][2];
      clear(sums);
#pragma GCC unroll 4
      for (int s = 0; s < 4; ++s) {
        __m256i w0[2], w1[2];
#pragma GCC unroll 2
        for (int h = 0; h < 2; ++h) {
          const __m256i hv = widen_u8(blk + 256 + 32 * s + 16 * h);
          const __m256i v0 = widen_u8(blk + 64 * s + 16 * h);
          const __m256i v1 = widen_u8(blk + 64 * s + 32 + 16 * h);
          if (half == 0) {  // columns 4 s, 4 s + 1 and 4 s + 2, 4 s + 3
            w0[h] = value(_mm256_and_si256(v0, low4), _mm256_slli_epi16(hv, 4));
            w1[h] = value(_mm256_and_si256(v1, low4), hv);
          } else {  // columns 16 + 4 s, ... and 18 + 4 s, ...
            w0[h] = value(_mm256_srli_epi16(v0, 4), _mm256_slli_epi16(hv, 2));
            w1[h] = value(_mm256_srli_epi16(v1, 4), _mm256_srli_epi16(hv, 2));
          }
        }
        dot_pair<T>(m, w0, col + 16 * half + 4 * s, sums);
        dot_pair<T>(m, w1, col + 16 * half + 4 * s + 2, sums);
      }
      const uint8_t* sch = sc + 16 * half;
      const RowPair scale{{_mm256_mul_ps(s8x8(sch), d.r[0]), _mm256_mul_ps(s8x8(sch + 8), d.r[1])}};
      flush<T, false>(m, 8 * u + j, sums, scale, scale, acc);
    }
  }
}

template <int T, gguf::TensorType L, bool kFirst, bool kPartial>
void micro(const InterleavedArgs& m) {
  const RowMasks mask(m.valid);
  __m256 acc[T][2];
  load_tile<T, kFirst, kPartial>(m.y, m.y_stride, mask, acc);
  for (int64_t u = 0; u < m.num_units; ++u) {
    if constexpr (L == gguf::TensorType::Q4_K) {
      q4_k_unit<T>(m, u, acc);
    } else if constexpr (L == gguf::TensorType::Q6_K) {
      q6_k_unit<T>(m, u, acc);
    } else if constexpr (L == gguf::TensorType::Q8_0) {
      q8_0_unit<T>(m, u, acc);
    } else if constexpr (L == gguf::TensorType::Q5_0) {
      q5_0_unit<T>(m, u, acc);
    } else {
      q4_0_unit<T>(m, u, acc);
    }
  }
  store_tile<T, kPartial>(m.y, m.y_stride, mask, acc);
}

using MicroFn = void (*)(const InterleavedArgs&);

template <gguf::TensorType L, bool kFirst, bool kPartial>
constexpr MicroFn kByTokens[kTokens] = {micro<1, L, kFirst, kPartial>, micro<2, L, kFirst, kPartial>,
                                        micro<3, L, kFirst, kPartial>};

template <gguf::TensorType L>
MicroFn micro_for(int64_t tokens, bool first, bool partial) {
  if (first) return partial ? kByTokens<L, true, true>[tokens - 1] : kByTokens<L, true, false>[tokens - 1];
  return partial ? kByTokens<L, false, true>[tokens - 1] : kByTokens<L, false, false>[tokens - 1];
}

// TypeKernels::gemm_interleaved for type L.
template <gguf::TensorType L>
void gemm(const WeightView& w, int64_t row_begin, int64_t row_end, const QuantizedActs& a, int64_t num_tokens,
          float* y) {
  walk_interleaved<kTokens, kInterleavedUnitCols<L>, kInterleavedUnitBytes<L>, kDecodePrefetchBytes<L>>(
      static_cast<const uint8_t*>(w.interleaved), w.rows, w.cols, row_begin, row_end, a, num_tokens, y, w.rows,
      [](const InterleavedArgs& m, int64_t tokens, bool first, bool partial) {
        micro_for<L>(tokens, first, partial)(m);
      });
}

}  // namespace

template <gguf::TensorType T>
constinit const TypeKernels::GemmInterleaved InterleavedKernels<T>::gemm_interleaved = gemm<T>;

template struct InterleavedKernels<gguf::TensorType::Q4_0>;
template struct InterleavedKernels<gguf::TensorType::Q5_0>;
template struct InterleavedKernels<gguf::TensorType::Q8_0>;
template struct InterleavedKernels<gguf::TensorType::Q4_K>;
template struct InterleavedKernels<gguf::TensorType::Q6_K>;

}  // namespace tokenmill::kernels::avx2
