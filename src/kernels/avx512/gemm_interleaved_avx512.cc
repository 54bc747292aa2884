// AVX-512 (F, BW, VNNI) products of weights interleaved at load
// (interleave.h: Q4_0 x 16, Q8_0 x 16, Q4_K x 16, Q6_K x 16) with int16
// activations (quantize_act.h): decode, batched decode and prefill, with no per-call
// packing. For each 4 columns of the 16 rows of a group (Q4_0; Q4_K: 2
// columns of two sub-blocks), one 32-byte load widened to int16 gives two
// column pairs (mask: low nibbles, shift: high ones), and each token adds
// them with two vpdpwssd against its broadcast activation pairs. 16 rows x
// up to 6 tokens of accumulators, one lane per row: no horizontal sums.
//
// Numerics: per 32-column block the integer sums are exact; then, as in the
// int16 packed GEMM (gemm_q16_avx2.cc), acc += float(sum) * (scale *
// d_act) and acc += bias * s32_act, block after block, with the scale and
// bias computed as the row decoders compute them (Q4_0: d and -8 d; Q4_K:
// sc * d and m * (0 - dmin)). So the results equal that kernel's bit for bit
// (and the scalar reference gemm_q16_ref, gemm.h).
#include <immintrin.h>

#include "kernels/avx512/avx512.h"
#include "kernels/avx512/math_avx512.h"
#include "kernels/gemm.h"
#include "kernels/interleave.h"
#include "kernels/x86/gemm_interleaved_walk.h"

namespace tokenmill::kernels::avx512 {
namespace {

constexpr int kTokens = 6;
// Decode prefetch distance along a row, in bytes (whole units, at least
// one): Q4_0 16 units, Q8_0 8, the K-quants the next super-block. The
// longest of the distances tried was the fastest for Q4_0; Q4_K needed the
// next super-block (see q4_k_unit; docs/benchmarks.md, kernel tuning).
constexpr int64_t kDecodePrefetchBytes = 16 * kQ4_0x16BlockBytes;

inline __m256i load256(const uint8_t* p) { return _mm256_load_si256(reinterpret_cast<const __m256i*>(p)); }

// 16 unsigned bytes (one per row) as floats.
inline __m512 bytes_to_float(const uint8_t* p) {
  return to_float(
      _mm512_maskz_cvtepu8_epi32(static_cast<__mmask16>(0xFFFF), _mm_load_si128(reinterpret_cast<const __m128i*>(p))));
}
// 16 signed bytes as floats.
inline __m512 signed_bytes_to_float(const uint8_t* p) {
  return to_float(
      _mm512_maskz_cvtepi8_epi32(static_cast<__mmask16>(0xFFFF), _mm_load_si128(reinterpret_cast<const __m128i*>(p))));
}

// Independent integer accumulators per token and block: vpdpwssd has a
// latency of several cycles, so one chain per token leaves the multiply
// pipes idle when there are few tokens (decode: one). Integer sums are
// exact, so the split does not change the results.
template <int T>
constexpr int kChains = T == 1   ? 4
                        : T == 2 ? 2
                                 : 1;

// acc[t] += float(sum of the chains) * (scale * d_act) [+ bias * s32_act].
template <int T, int C, bool kBias = true>
inline void flush(const InterleavedArgs& m, int64_t blk, __m512i (&sums)[T][C], __m512 scale, __m512 bias,
                  __m512 (&acc)[T]) {
#pragma GCC unroll 6
  for (int t = 0; t < T; ++t) {
    __m512i total = sums[t][0];
#pragma GCC unroll 4
    for (int c = 1; c < C; ++c) total = _mm512_add_epi32(total, sums[t][c]);
    const __m512 dt = _mm512_set1_ps(m.d[t * m.act_blocks + blk]);
    acc[t] = _mm512_fmadd_ps(to_float(total), _mm512_mul_ps(scale, dt), acc[t]);
    if constexpr (kBias) acc[t] = _mm512_fmadd_ps(bias, _mm512_set1_ps(m.s32[t * m.act_blocks + blk]), acc[t]);
  }
}

// One 32-bit lane per row: token t's pairs w . a over the chains.
template <int T, int C>
inline void dot_pair(const InterleavedArgs& m, __m512i w, int64_t col, int chain, __m512i (&sums)[T][C]) {
#pragma GCC unroll 6
  for (int t = 0; t < T; ++t)
    sums[t][chain] = _mm512_dpwssd_epi32(sums[t][chain], w, bcast_pair(m.q + t * m.q_stride + col));
}

// Column pairs 0..n-1 of two blocks (a: low nibbles, b: high ones) from n
// consecutive 32-byte segments at seg; activations of block a at column
// qa, of block b at qb (pair p at + 2 p).
template <int T, int C>
inline void nibble_pairs(const uint8_t* seg, int n, const InterleavedArgs& m, int64_t qa, int64_t qb,
                         __m512i (&sa)[T][C], __m512i (&sb)[T][C]) {
  const __m512i low4 = _mm512_set1_epi16(15);
#pragma GCC unroll 16
  for (int p = 0; p < n; ++p) {
    const __m512i v = _mm512_cvtepu8_epi16(load256(seg + 32 * p));
    const __m512i lo = _mm512_and_si512(v, low4);
    const __m512i hi = _mm512_srli_epi16(v, 4);
    // Both halves per token rather than two dot_pair calls (all tokens' a,
    // then all b): faster at prefill lengths.
#pragma GCC unroll 6
    for (int t = 0; t < T; ++t) {
      const int16_t* qt = m.q + t * m.q_stride;
      __m512i& a = sa[t][p % C];
      __m512i& b = sb[t][p % C];
      a = _mm512_dpwssd_epi32(a, lo, bcast_pair(qt + qa + 2 * p));
      b = _mm512_dpwssd_epi32(b, hi, bcast_pair(qt + qb + 2 * p));
    }
  }
}

template <int T, int C>
inline void clear(__m512i (&sums)[T][C]) {
#pragma GCC unroll 6
  for (int t = 0; t < T; ++t) {
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c) sums[t][c] = _mm512_setzero_si512();
  }
}

// Q4_0 x 16, one 32-column block per unit: segment p holds pairs p (low
// nibbles) and p + 8 (high), both of the same block, so the two halves of
// the block's sum are kept apart only to give the chains more parallelism.
template <int T>
inline void q4_0_unit(const InterleavedArgs& m, int64_t u, __m512 (&acc)[T]) {
  constexpr int C = kChains<T>;
  const uint8_t* bp = m.w + u * kQ4_0x16BlockBytes;
  prefetch_lines(bp + m.prefetch, kQ4_0x16BlockBytes);
  __m512i sa[T][C], sb[T][C];
  clear(sa);
  clear(sb);
  nibble_pairs<T, C>(bp, 8, m, 32 * u, 32 * u + 16, sa, sb);
#pragma GCC unroll 6
  for (int t = 0; t < T; ++t) {
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c) sa[t][c] = _mm512_add_epi32(sa[t][c], sb[t][c]);
  }
  const __m512 scale = fp16_to_float(load256(bp + 256));
  flush<T, C>(m, u, sa, scale, _mm512_mul_ps(scale, _mm512_set1_ps(-8.0f)), acc);
}

// Q8_0 x 16, one 32-column block per unit: segment p, sign-extended, is
// column pair p of the 16 rows.
template <int T>
inline void q8_0_unit(const InterleavedArgs& m, int64_t u, __m512 (&acc)[T]) {
  constexpr int C = kChains<T>;
  const uint8_t* bp = m.w + u * kQ8_0x16BlockBytes;
  prefetch_lines(bp + m.prefetch, kQ8_0x16BlockBytes);
  __m512i sums[T][C];
  clear(sums);
#pragma GCC unroll 16
  for (int p = 0; p < 16; ++p) {
    dot_pair<T, C>(m, _mm512_cvtepi8_epi16(load256(bp + 32 * p)), 32 * u + 2 * p, p % C, sums);
  }
  flush<T, C, false>(m, u, sums, fp16_to_float(load256(bp + 512)), _mm512_setzero_ps(), acc);
}

// Q4_K x 16, one 256-column super-block per unit: for each pair k of
// sub-blocks, segment p holds pair p of sub-block 2 k (low nibbles) and of
// 2 k + 1 (high); the sub-blocks are flushed in order with their scales.
template <int T>
inline void q4_k_unit(const InterleavedArgs& m, int64_t u, __m512 (&acc)[T]) {
  constexpr int C = kChains<T>;
  const uint8_t* bp = m.w + u * kQ4_Kx16BlockBytes;
  const __m512 d = fp16_to_float(load256(bp + kQ4_Kx16Scales));
  const __m512 neg_dmin = _mm512_sub_ps(_mm512_setzero_ps(), fp16_to_float(load256(bp + kQ4_Kx16Scales + 32)));
  const uint8_t* sc = bp + kQ4_Kx16Scales + 64;
  const uint8_t* mn = sc + 128;
  for (int k = 0; k < 4; ++k) {
    // The next unit's bytes (gemm()), a quarter per sub-block pair: its
    // scales sit 2 KB past its quants, where the hardware prefetcher,
    // following the quants, arrives too late (measured stalls on them).
    prefetch_lines(bp + m.prefetch + k * (kQ4_Kx16BlockBytes / 4), kQ4_Kx16BlockBytes / 4);
    __m512i sa[T][C], sb[T][C];
    clear(sa);
    clear(sb);
    nibble_pairs<T, C>(bp + 512 * k, 16, m, 256 * u + 64 * k, 256 * u + 64 * k + 32, sa, sb);
    const int64_t blk = 8 * u + 2 * k;
    flush<T, C>(m, blk, sa, _mm512_mul_ps(bytes_to_float(sc + 16 * (2 * k)), d),
                _mm512_mul_ps(bytes_to_float(mn + 16 * (2 * k)), neg_dmin), acc);
    flush<T, C>(m, blk + 1, sb, _mm512_mul_ps(bytes_to_float(sc + 16 * (2 * k + 1)), d),
                _mm512_mul_ps(bytes_to_float(mn + 16 * (2 * k + 1)), neg_dmin), acc);
  }
}

// Q6_K x 16, one 256-column super-block per unit: per 32-column block, 8
// segments of low 4 bits (pairs p and p + 8) and 4 of high 2 bits (pairs
// 2 s, 2 s + 8, 2 s + 1, 2 s + 9); each pair becomes q - 32 in int16 lanes.
// The sums of the block's two 16-column halves are kept apart (sa: pairs
// 0..7, sb: 8..15) and flushed in order, each with its own scale; no
// additive term.
template <int T>
inline void q6_k_unit(const InterleavedArgs& m, int64_t u, __m512 (&acc)[T]) {
  constexpr int C = kChains<T>;
  const uint8_t* bp = m.w + u * kQ6_Kx16BlockBytes;
  const __m512 d = fp16_to_float(load256(bp + kQ6_Kx16Scales + 256));
  const __m512i low4 = _mm512_set1_epi16(15);
  const __m512i high2 = _mm512_set1_epi16(0x30);
  const __m512i offset = _mm512_set1_epi16(32);
  // q - 32 from low bits `lo` (already masked) and high bits at 4-5 of `hi`
  // (other bits ignored): vpternlog computes lo | (hi & 0x30).
  const auto value = [&](__m512i lo, __m512i hi) {
    return _mm512_sub_epi16(_mm512_ternarylogic_epi32(lo, hi, high2, 0xF8), offset);
  };
  for (int64_t j = 0; j < 8; ++j) {
    // The next unit's bytes, an eighth per block (see q4_k_unit).
    prefetch_lines(bp + m.prefetch + j * (kQ6_Kx16BlockBytes / 8), kQ6_Kx16BlockBytes / 8);
    const uint8_t* blk = bp + 384 * j;
    const int64_t col = 256 * u + 32 * j;
    __m512i sa[T][C], sb[T][C];
    clear(sa);
    clear(sb);
#pragma GCC unroll 4
    for (int s = 0; s < 4; ++s) {
      const __m512i h = _mm512_cvtepu8_epi16(load256(blk + 256 + 32 * s));
      const __m512i v0 = _mm512_cvtepu8_epi16(load256(blk + 64 * s));
      const __m512i v1 = _mm512_cvtepu8_epi16(load256(blk + 64 * s + 32));
      dot_pair<T, C>(m, value(_mm512_and_si512(v0, low4), _mm512_slli_epi16(h, 4)), col + 4 * s, (2 * s) % C, sa);
      dot_pair<T, C>(m, value(_mm512_srli_epi16(v0, 4), _mm512_slli_epi16(h, 2)), col + 16 + 4 * s, (2 * s) % C, sb);
      dot_pair<T, C>(m, value(_mm512_and_si512(v1, low4), h), col + 4 * s + 2, (2 * s + 1) % C, sa);
      dot_pair<T, C>(m, value(_mm512_srli_epi16(v1, 4), _mm512_srli_epi16(h, 2)), col + 18 + 4 * s, (2 * s + 1) % C,
                     sb);
    }
    const uint8_t* sc = bp + kQ6_Kx16Scales + 32 * j;
    const __m512 none = _mm512_setzero_ps();
    flush<T, C, false>(m, 8 * u + j, sa, _mm512_mul_ps(signed_bytes_to_float(sc), d), none, acc);
    flush<T, C, false>(m, 8 * u + j, sb, _mm512_mul_ps(signed_bytes_to_float(sc + 16), d), none, acc);
  }
}

template <int T, gguf::TensorType L, bool kFirst, bool kPartial>
void micro(const InterleavedArgs& m) {
  const __mmask16 mask = row_mask(m.valid);
  __m512 acc[T];
  load_tile<T, kFirst, kPartial>(m.y, m.y_stride, mask, acc);
  for (int64_t u = 0; u < m.num_units; ++u) {
    if constexpr (L == gguf::TensorType::Q4_K) {
      q4_k_unit<T>(m, u, acc);
    } else if constexpr (L == gguf::TensorType::Q6_K) {
      q6_k_unit<T>(m, u, acc);
    } else if constexpr (L == gguf::TensorType::Q8_0) {
      q8_0_unit<T>(m, u, acc);
    } else {
      q4_0_unit<T>(m, u, acc);
    }
  }
  store_tile<T, kPartial>(m.y, m.y_stride, mask, acc);
}

using MicroFn = void (*)(const InterleavedArgs&);

template <gguf::TensorType L, bool kFirst, bool kPartial>
constexpr MicroFn kByTokens[kTokens] = {micro<1, L, kFirst, kPartial>, micro<2, L, kFirst, kPartial>,
                                        micro<3, L, kFirst, kPartial>, micro<4, L, kFirst, kPartial>,
                                        micro<5, L, kFirst, kPartial>, micro<6, L, kFirst, kPartial>};

template <gguf::TensorType L>
MicroFn micro_for(int64_t tokens, bool first, bool partial) {
  if (first) return partial ? kByTokens<L, true, true>[tokens - 1] : kByTokens<L, true, false>[tokens - 1];
  return partial ? kByTokens<L, false, true>[tokens - 1] : kByTokens<L, false, false>[tokens - 1];
}

// TypeKernels::gemm_interleaved for type L.
template <gguf::TensorType L>
void gemm(const WeightView& w, int64_t row_begin, int64_t row_end, const QuantizedActs& a, int64_t num_tokens,
          float* y) {
  walk_interleaved<kTokens, kInterleavedUnitCols<L>, kInterleavedUnitBytes<L>, kDecodePrefetchBytes>(
      static_cast<const uint8_t*>(w.interleaved), w.rows, w.cols, row_begin, row_end, a, num_tokens, y, w.rows,
      [](const InterleavedArgs& m, int64_t tokens, bool first, bool partial) {
        micro_for<L>(tokens, first, partial)(m);
      });
}

}  // namespace

template <gguf::TensorType T>
constinit const TypeKernels::GemmInterleaved InterleavedKernels<T>::gemm_interleaved = gemm<T>;

template struct InterleavedKernels<gguf::TensorType::Q4_0>;
template struct InterleavedKernels<gguf::TensorType::Q8_0>;
template struct InterleavedKernels<gguf::TensorType::Q4_K>;
template struct InterleavedKernels<gguf::TensorType::Q6_K>;

}  // namespace tokenmill::kernels::avx512
