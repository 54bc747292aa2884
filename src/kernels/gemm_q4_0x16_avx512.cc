// AVX-512 (F, BW, VNNI) products of Q4_0 weights in the Q4_0 x 16 layout
// (interleave.h) with int16 activations (quantize_act.h): decode, batched
// decode and prefill, with no per-call packing. For each 4 columns of the
// 16 rows of a group, one 32-byte load widened to int16 gives two column
// pairs (mask: low nibbles, shift: high ones), and each token adds them
// with two vpdpwssd against its broadcast activation pairs. 16 rows x up to
// 6 tokens of accumulators, one lane per row: no horizontal sums.
//
// Numerics: per 32-column block the integer sums are exact; then, as in the
// int16 packed GEMM (gemm_q16_avx2.cc) for Q4_0, acc += float(sum) * (d *
// d_act) and acc += (-8 d) * s32_act, in that order. So the results equal
// that kernel's bit for bit (and its scalar emulation in the tests).
#include <immintrin.h>
#include <string.h>

#include "kernels/gemm.h"
#include "kernels/interleave.h"

namespace tokenmill::kernels::avx512 {
namespace {

constexpr int kTokens = 6;
constexpr int64_t kChunkBlocks = kPackChunk / 32;  // columns a group keeps in L1 across token tiles

// The all-lanes conversions through their zero-masking forms: the same
// instructions, without the _mm512_undefined_ps that GCC 12 reports as
// "may be used uninitialized".
inline __m512 to_float(__m512i v) { return _mm512_maskz_cvtepi32_ps(static_cast<__mmask16>(0xFFFF), v); }
inline __m512 fp16_to_float(__m256i v) { return _mm512_maskz_cvtph_ps(static_cast<__mmask16>(0xFFFF), v); }

inline __m512i bcast_pair(const int16_t* p) {
  int32_t v;
  memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}

struct Q4Args {
  const uint8_t* w;  // the group's first block of the chunk
  int64_t num_blocks;
  const int16_t* q;  // token t: q + t * q_stride, at the chunk's first column
  int64_t q_stride;
  const float* d;    // token t, block b: d[t * act_blocks + b]
  const float* s32;
  int64_t act_blocks;
  float* y;          // token t: y + t * y_stride, at the group's first row
  int64_t y_stride;
  int64_t valid;     // rows of the group that exist (16 but for the last group)
};

// Independent integer accumulators per token: vpdpwssd has a latency of
// several cycles, so one chain per token leaves the multiply pipes idle
// when there are few tokens (decode: one). Integer sums are exact, so the
// split does not change the results.
template <int T>
constexpr int kChains = T == 1 ? 8 : T == 2 ? 4 : 2;

template <int T, bool kFirst, bool kPartial>
void micro(const Q4Args& m) {
  constexpr int K = kChains<T>;
  const __mmask16 mask = static_cast<__mmask16>((1u << m.valid) - 1u);
  const __m512i low4 = _mm512_set1_epi16(15);
  __m512 acc[T];
#pragma GCC unroll 6
  for (int t = 0; t < T; ++t) {
    float* yt = m.y + t * m.y_stride;
    if constexpr (kFirst) {
      acc[t] = _mm512_setzero_ps();
    } else if constexpr (kPartial) {
      acc[t] = _mm512_maskz_loadu_ps(mask, yt);
    } else {
      acc[t] = _mm512_loadu_ps(yt);
    }
  }
  for (int64_t b = 0; b < m.num_blocks; ++b) {
    const uint8_t* bp = m.w + b * kQ4_0x16BlockBytes;
    __m512i sums[T][K];
#pragma GCC unroll 6
    for (int t = 0; t < T; ++t) {
#pragma GCC unroll 8
      for (int k = 0; k < K; ++k) sums[t][k] = _mm512_setzero_si512();
    }
#pragma GCC unroll 8
    for (int p = 0; p < 8; ++p) {
      const __m512i v = _mm512_cvtepu8_epi16(_mm256_load_si256(reinterpret_cast<const __m256i*>(bp + 32 * p)));
      const __m512i lo = _mm512_and_si512(v, low4);
      const __m512i hi = _mm512_srli_epi16(v, 4);
#pragma GCC unroll 6
      for (int t = 0; t < T; ++t) {
        const int16_t* qt = m.q + t * m.q_stride + 32 * b;
        __m512i& s_lo = sums[t][(2 * p) % K];
        __m512i& s_hi = sums[t][(2 * p + 1) % K];
        s_lo = _mm512_dpwssd_epi32(s_lo, lo, bcast_pair(qt + 2 * p));
        s_hi = _mm512_dpwssd_epi32(s_hi, hi, bcast_pair(qt + 16 + 2 * p));
      }
    }
    const __m512 scale = fp16_to_float(_mm256_load_si256(reinterpret_cast<const __m256i*>(bp + 256)));
    const __m512 bias = _mm512_mul_ps(scale, _mm512_set1_ps(-8.0f));
#pragma GCC unroll 6
    for (int t = 0; t < T; ++t) {
      __m512i total = sums[t][0];
#pragma GCC unroll 8
      for (int k = 1; k < K; ++k) total = _mm512_add_epi32(total, sums[t][k]);
      const __m512 dt = _mm512_set1_ps(m.d[t * m.act_blocks + b]);
      acc[t] = _mm512_fmadd_ps(to_float(total), _mm512_mul_ps(scale, dt), acc[t]);
      acc[t] = _mm512_fmadd_ps(bias, _mm512_set1_ps(m.s32[t * m.act_blocks + b]), acc[t]);
    }
  }
#pragma GCC unroll 6
  for (int t = 0; t < T; ++t) {
    float* yt = m.y + t * m.y_stride;
    if constexpr (kPartial) {
      _mm512_mask_storeu_ps(yt, mask, acc[t]);
    } else {
      _mm512_storeu_ps(yt, acc[t]);
    }
  }
}

using MicroFn = void (*)(const Q4Args&);

template <bool kFirst, bool kPartial>
constexpr MicroFn kByTokens[kTokens] = {micro<1, kFirst, kPartial>, micro<2, kFirst, kPartial>,
                                        micro<3, kFirst, kPartial>, micro<4, kFirst, kPartial>,
                                        micro<5, kFirst, kPartial>, micro<6, kFirst, kPartial>};

MicroFn micro_for(int64_t tokens, bool first, bool partial) {
  if (first) return partial ? kByTokens<true, true>[tokens - 1] : kByTokens<true, false>[tokens - 1];
  return partial ? kByTokens<false, true>[tokens - 1] : kByTokens<false, false>[tokens - 1];
}

}  // namespace

void gemm_q4_0x16(const uint8_t* packed, int64_t rows, int64_t cols, int64_t row_begin, int64_t row_end,
                  const QuantizedActs& a, int64_t num_tokens, float* y, int64_t y_stride) {
  const int64_t blocks = cols / 32;
  const int64_t group_bytes = blocks * kQ4_0x16BlockBytes;
  const int64_t g0 = row_begin / kInterleaveRows;
  const int64_t g1 = (row_end + kInterleaveRows - 1) / kInterleaveRows;
  // Column chunks keep a group's weights in L1 while several token tiles
  // pass over them; one tile (decode) reads each group once, front to back.
  const int64_t chunk = num_tokens <= kTokens ? blocks : kChunkBlocks;
  for (int64_t c0 = 0; c0 < blocks; c0 += chunk) {
    const int64_t nb = blocks - c0 < chunk ? blocks - c0 : chunk;
    for (int64_t g = g0; g < g1; ++g) {
      const int64_t r0 = g * kInterleaveRows;
      const int64_t valid = rows - r0 < kInterleaveRows ? rows - r0 : kInterleaveRows;
      for (int64_t t0 = 0; t0 < num_tokens; t0 += kTokens) {
        const int64_t nt = num_tokens - t0 < kTokens ? num_tokens - t0 : kTokens;
        const Q4Args m{packed + g * group_bytes + c0 * kQ4_0x16BlockBytes,
                       nb,
                       a.qs + t0 * cols + 32 * c0,
                       cols,
                       a.d + t0 * blocks + c0,
                       a.s32 + t0 * blocks + c0,
                       blocks,
                       y + t0 * y_stride + r0,
                       y_stride,
                       valid};
        micro_for(nt, c0 == 0, valid < kInterleaveRows)(m);
      }
    }
  }
}

}  // namespace tokenmill::kernels::avx512
