// AVX2 helpers shared by the *_avx2.cc files, and only those (it needs
// -mavx2 -mfma -mf16c). Everything here has internal linkage so that no
// AVX-encoded copy of it can be linked into code for other CPUs.
#pragma once

#include <immintrin.h>
#include <string.h>

#include <cstdint>

namespace tokenmill::kernels {
namespace {  // NOLINT(build/namespaces): internal linkage on purpose, see above

// Sum of the 8 lanes, in a fixed order (so results are reproducible).
inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline double hsum_pd(__m256d v) {
  __m128d s = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
  s = _mm_add_sd(s, _mm_unpackhi_pd(s, s));
  return _mm_cvtsd_f64(s);
}

inline float hmax(__m256 v) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// Adds the squares of 8 floats to two double accumulators.
inline void add_squares_pd(__m256 v, __m256d& acc0, __m256d& acc1) {
  const __m256d lo = _mm256_cvtps_pd(_mm256_castps256_ps128(v));
  const __m256d hi = _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1));
  acc0 = _mm256_fmadd_pd(lo, lo, acc0);
  acc1 = _mm256_fmadd_pd(hi, hi, acc1);
}

inline void add_pd(__m256 v, __m256d& acc0, __m256d& acc1) {
  acc0 = _mm256_add_pd(acc0, _mm256_cvtps_pd(_mm256_castps256_ps128(v)));
  acc1 = _mm256_add_pd(acc1, _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
}

// e^x for 8 floats. x = n*ln2 + r with |r| <= ln2/2 (ln2 split in two for an
// exact product), e^r by its degree-7 Taylor polynomial (truncation error
// < 6e-9 relative), times 2^n built in the exponent bits. Measured error is
// within 2 ulp (~2.4e-7 relative). Inputs are clamped to [-87.3, 88.3] so the
// result stays a normal float: below the range it returns ~1.2e-38 instead of
// a subnormal or 0 (an absolute error under 1.2e-38); above, ~2.2e38 instead
// of overflowing. NaN inputs give unspecified results.
inline __m256 exp_ps(__m256 x) {
  x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.3f)), _mm256_set1_ps(88.3f));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.0f / 5040.0f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 720.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  const __m256i bits = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(bits));
}

// x / (1 + e^-z): x times the logistic sigmoid of z, without the cancellation
// that 1 + tanh would have (silu and gelu_tanh are both of this form).
inline __m256 mul_sigmoid_ps(__m256 x, __m256 z) {
  const __m256 e = exp_ps(_mm256_sub_ps(_mm256_setzero_ps(), z));
  return _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
}

// The int16 pair at p (two activations) in every 32-bit lane, for madd_epi16.
inline __m256i bcast_pair(const int16_t* p) {
  int32_t v;
  memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

// Mask for a partial vector of `count` (0..8) leading lanes.
inline __m256i tail_mask(int64_t count) {
  const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(count)), idx);
}

// The lanes of the first `valid` (<= 16) rows of a 16-row output tile, as
// two masks of 8 (rows 0-7, rows 8-15).
struct RowMasks {
  explicit RowMasks(int64_t valid) : m{tail_mask(valid < 8 ? valid : 8), tail_mask(valid > 8 ? valid - 8 : 0)} {}
  __m256i m[2];
};

// acc[t] = the 16 outputs of token t at y + t * ys: zero for the first
// column chunk (kFirst), else what the previous chunk left (only the masked
// rows when kPartial).
template <int T, bool kFirst, bool kPartial>
inline void load_tile(const float* y, int64_t ys, const RowMasks& mask, __m256 (&acc)[T][2]) {
#pragma GCC unroll 6
  for (int t = 0; t < T; ++t) {
    const float* yt = y + t * ys;
    if constexpr (kFirst) {
      acc[t][0] = acc[t][1] = _mm256_setzero_ps();
    } else if constexpr (kPartial) {
      acc[t][0] = _mm256_maskload_ps(yt, mask.m[0]);
      acc[t][1] = _mm256_maskload_ps(yt + 8, mask.m[1]);
    } else {
      acc[t][0] = _mm256_loadu_ps(yt);
      acc[t][1] = _mm256_loadu_ps(yt + 8);
    }
  }
}

// Stores acc[t] to y + t * ys (only the masked rows when kPartial).
template <int T, bool kPartial>
inline void store_tile(float* y, int64_t ys, const RowMasks& mask, const __m256 (&acc)[T][2]) {
#pragma GCC unroll 6
  for (int t = 0; t < T; ++t) {
    float* yt = y + t * ys;
    if constexpr (kPartial) {
      _mm256_maskstore_ps(yt, mask.m[0], acc[t][0]);
      _mm256_maskstore_ps(yt + 8, mask.m[1], acc[t][1]);
    } else {
      _mm256_storeu_ps(yt, acc[t][0]);
      _mm256_storeu_ps(yt + 8, acc[t][1]);
    }
  }
}

// In place: r[i] becomes column i of the 8 x 8 block whose rows were r[0..7].
inline void transpose8(__m256 r[8]) {
  const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
  const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
  const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
  const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
  const __m256 s0 = _mm256_shuffle_ps(t0, t2, 0x44), s1 = _mm256_shuffle_ps(t0, t2, 0xEE);
  const __m256 s2 = _mm256_shuffle_ps(t1, t3, 0x44), s3 = _mm256_shuffle_ps(t1, t3, 0xEE);
  const __m256 s4 = _mm256_shuffle_ps(t4, t6, 0x44), s5 = _mm256_shuffle_ps(t4, t6, 0xEE);
  const __m256 s6 = _mm256_shuffle_ps(t5, t7, 0x44), s7 = _mm256_shuffle_ps(t5, t7, 0xEE);
  r[0] = _mm256_permute2f128_ps(s0, s4, 0x20);
  r[1] = _mm256_permute2f128_ps(s1, s5, 0x20);
  r[2] = _mm256_permute2f128_ps(s2, s6, 0x20);
  r[3] = _mm256_permute2f128_ps(s3, s7, 0x20);
  r[4] = _mm256_permute2f128_ps(s0, s4, 0x31);
  r[5] = _mm256_permute2f128_ps(s1, s5, 0x31);
  r[6] = _mm256_permute2f128_ps(s2, s6, 0x31);
  r[7] = _mm256_permute2f128_ps(s3, s7, 0x31);
}

}  // namespace
}  // namespace tokenmill::kernels
