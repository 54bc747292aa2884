// AVX2 packed-panel GEMM with int16 weights and int16 activations (see
// gemm.h): the 8 x 8 transposing packer and the 16-row x 3-token micro-kernel.
//
// Inner step, per pair of columns (k, k + 1): two vectors hold those two
// columns of 16 rows as interleaved int16; the activation pair of a token is
// broadcast as one int32; madd_epi16 gives, per row lane, w_k a_k +
// w_k+1 a_k+1, added into int32 accumulators. After the 16 pairs of a
// 32-column block (or each 16-column half, for types with a scale per 16)
// the int32 sums are converted once and scaled by (weight scale of each row)
// x (activation scale of the token). That is 2 multiply-class instructions
// per 32 products where the FP32 kernel needs 4 FMAs (docs/benchmarks.md,
// kernel tuning, has the measured rates).
#include <immintrin.h>

#include "kernels/avx2/avx2.h"
#include "kernels/avx2/math_avx2.h"
#include "kernels/gemm.h"
#include "kernels/x86/gemm_tiles.h"

namespace tokenmill::kernels::avx2 {
namespace {

constexpr int kTokens = 3;  // 6 int32 + 6 float accumulators, 2 weight vectors, 1 broadcast

// In place: r[i] becomes column i of the 8 x 8 block of 32-bit elements whose
// rows were r[0..7] (pure data movement: the float transpose on integer bits).
inline void transpose8_epi32(__m256i r[8]) {
  __m256 v[8];
  for (int i = 0; i < 8; ++i) v[i] = _mm256_castsi256_ps(r[i]);
  transpose8(v);
  for (int i = 0; i < 8; ++i) r[i] = _mm256_castps_si256(v[i]);
}

using MicroArgs = Q16MicroArgs;

// acc[t][v] += cvt(sums[t][v]) * scale[h][8 v ..] * d_t (then clears sums).
template <int T>
inline void flush(const MicroArgs& m, int64_t h, int64_t b, __m256i sums[T][2], __m256 acc[T][2]) {
  const __m256 s0 = _mm256_loadu_ps(m.scale + h * m.panel_rows);
  const __m256 s1 = _mm256_loadu_ps(m.scale + h * m.panel_rows + 8);
#pragma GCC unroll 3
  for (int t = 0; t < T; ++t) {
    const __m256 d = _mm256_broadcast_ss(m.d + t * m.act_blocks + b);
    acc[t][0] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums[t][0]), _mm256_mul_ps(s0, d), acc[t][0]);
    acc[t][1] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums[t][1]), _mm256_mul_ps(s1, d), acc[t][1]);
    sums[t][0] = _mm256_setzero_si256();
    sums[t][1] = _mm256_setzero_si256();
  }
}

// acc[t][v] += bias[h][8 v ..] * s (s = the token's activation sum of half h
// or, for per-32 biases, of block b).
template <int T>
inline void add_bias(const MicroArgs& m, int64_t h, const float* s, int64_t s_stride, __m256 acc[T][2]) {
  const __m256 b0 = _mm256_loadu_ps(m.bias + h * m.panel_rows);
  const __m256 b1 = _mm256_loadu_ps(m.bias + h * m.panel_rows + 8);
#pragma GCC unroll 3
  for (int t = 0; t < T; ++t) {
    const __m256 sv = _mm256_broadcast_ss(s + t * s_stride);
    acc[t][0] = _mm256_fmadd_ps(b0, sv, acc[t][0]);
    acc[t][1] = _mm256_fmadd_ps(b1, sv, acc[t][1]);
  }
}

// y rows [0, 16) (first `valid`) of tokens [0, T) (+)= the chunk's products.
template <int T, bool kFirst, bool kPartial, bool kHalves, int kBias>
void micro(const MicroArgs& m) {
  const RowMasks mask(m.valid);
  __m256 acc[T][2];
  load_tile<T, kFirst, kPartial>(m.y, m.y_stride, mask, acc);
  __m256i sums[T][2];
#pragma GCC unroll 3
  for (int t = 0; t < T; ++t) sums[t][0] = sums[t][1] = _mm256_setzero_si256();
  for (int64_t b = 0; b < m.num_blocks; ++b) {
    const int16_t* wb = m.w + b * 16 * 32;
#pragma GCC unroll 16
    for (int j = 0; j < 16; ++j) {
      const __m256i w0 = _mm256_load_si256(reinterpret_cast<const __m256i*>(wb + 32 * j));
      const __m256i w1 = _mm256_load_si256(reinterpret_cast<const __m256i*>(wb + 32 * j + 16));
#pragma GCC unroll 3
      for (int t = 0; t < T; ++t) {
        const __m256i a = bcast_pair(m.q + t * m.q_stride + 32 * b + 2 * j);
        sums[t][0] = _mm256_add_epi32(sums[t][0], _mm256_madd_epi16(w0, a));
        sums[t][1] = _mm256_add_epi32(sums[t][1], _mm256_madd_epi16(w1, a));
        // Keeps the sums a chain in registers: without it GCC reassociates
        // the 16 integer adds into a tree and spills the madd results.
        __asm__("" : "+x"(sums[t][0]), "+x"(sums[t][1]));
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

template <bool kHalves, int kBias>
MicroFn micro_for(int64_t tokens, bool first, bool partial) {
  static constexpr MicroFn table[2][2][kTokens] = {
      {{micro<1, false, false, kHalves, kBias>, micro<2, false, false, kHalves, kBias>,
        micro<3, false, false, kHalves, kBias>},
       {micro<1, false, true, kHalves, kBias>, micro<2, false, true, kHalves, kBias>,
        micro<3, false, true, kHalves, kBias>}},
      {{micro<1, true, false, kHalves, kBias>, micro<2, true, false, kHalves, kBias>,
        micro<3, true, false, kHalves, kBias>},
       {micro<1, true, true, kHalves, kBias>, micro<2, true, true, kHalves, kBias>,
        micro<3, true, true, kHalves, kBias>}}};
  return table[first][partial][tokens - 1];
}

MicroFn micro_for(bool halves, int bias, int64_t tokens, bool first, bool partial) {
  if (halves)
    return bias == 16 ? micro_for<true, 16>(tokens, first, partial) : micro_for<true, 0>(tokens, first, partial);
  return bias == 32 ? micro_for<false, 32>(tokens, first, partial) : micro_for<false, 0>(tokens, first, partial);
}

}  // namespace

void pack_q16_rows(const int16_t* q, const float* scale16, const float* bias16, int64_t num_src, int64_t cols,
                   int64_t row0, int64_t panel_rows, int16_t* packed_q, float* packed_scale, float* packed_bias) {
  const int64_t group = row0 / kPackRows;
  const int64_t lane0 = row0 % kPackRows;
  for (int64_t k0 = 0; k0 < cols; k0 += kPackChunk) {
    const int64_t kn = cols - k0 < kPackChunk ? cols - k0 : kPackChunk;
    int16_t* base = packed_q + k0 * panel_rows + group * kn * kPackRows + 2 * lane0;
    for (int64_t j0 = 0; j0 < kn / 2; j0 += 8) {  // 8 column pairs
      __m256i r[8];
      for (int i = 0; i < 8; ++i) {
        r[i] = i < num_src ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + i * cols + k0 + 2 * j0))
                           : _mm256_setzero_si256();
      }
      transpose8_epi32(r);
      for (int i = 0; i < 8; ++i) _mm256_store_si256(reinterpret_cast<__m256i*>(base + (j0 + i) * 2 * kPackRows), r[i]);
    }
  }
  const int64_t halves = cols / 16;
  for (int64_t h = 0; h < halves; ++h) {
    for (int64_t i = 0; i < 8; ++i) {
      packed_scale[h * panel_rows + row0 + i] = i < num_src ? scale16[i * halves + h] : 0.0f;
      packed_bias[h * panel_rows + row0 + i] = i < num_src ? bias16[i * halves + h] : 0.0f;
    }
  }
}

void gemm_q16_packed(const int16_t* packed_q, const float* packed_scale, const float* packed_bias, bool halves,
                     int bias, int64_t num_rows, int64_t cols, const QuantizedActs& a, int64_t num_tokens, float* y,
                     int64_t y_stride) {
  for_each_q16_tile<kTokens>(packed_q, packed_scale, packed_bias, num_rows, cols, a, num_tokens, y, y_stride,
                             [&](const MicroArgs& m, int64_t nt, bool first, bool partial) {
                               micro_for(halves, bias, nt, first, partial)(m);
                             });
}

}  // namespace tokenmill::kernels::avx2
