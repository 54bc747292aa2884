// AVX-512 helpers shared by the *_avx512.cc files, and only those (they need
// -mavx512f -mavx512bw). Internal linkage, as math_avx2.h and for the same
// reason (see dispatch.h).
#pragma once

#include <immintrin.h>
#include <string.h>

#include <cstdint>

namespace tokenmill::kernels {
namespace {  // NOLINT(build/namespaces): internal linkage on purpose, see above

// The all-lanes conversions through their zero-masking forms: the same
// instructions, without the _mm512_undefined_* that GCC 12 reports as "may
// be used uninitialized".
inline __m512 to_float(__m512i v) { return _mm512_maskz_cvtepi32_ps(static_cast<__mmask16>(0xFFFF), v); }
inline __m512 fp16_to_float(__m256i v) { return _mm512_maskz_cvtph_ps(static_cast<__mmask16>(0xFFFF), v); }

// The int16 pair at p (two activations) in every 32-bit lane, for vpdpwssd.
inline __m512i bcast_pair(const int16_t* p) {
  int32_t v;
  memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}

// The lanes of the first `valid` (<= 16) rows of a 16-row output tile.
inline __mmask16 row_mask(int64_t valid) { return static_cast<__mmask16>((1u << valid) - 1u); }

// acc[t] = 16 outputs of token t at y + t * ys: zero for the first column
// chunk (kFirst), else what the previous chunk left (only the masked rows
// when kPartial).
template <int T, bool kFirst, bool kPartial>
inline void load_tile(const float* y, int64_t ys, __mmask16 mask, __m512 (&acc)[T]) {
#pragma GCC unroll 12
  for (int t = 0; t < T; ++t) {
    if constexpr (kFirst) {
      acc[t] = _mm512_setzero_ps();
    } else if constexpr (kPartial) {
      acc[t] = _mm512_maskz_loadu_ps(mask, y + t * ys);
    } else {
      acc[t] = _mm512_loadu_ps(y + t * ys);
    }
  }
}

// Stores acc[t] to y + t * ys (only the masked rows when kPartial).
template <int T, bool kPartial>
inline void store_tile(float* y, int64_t ys, __mmask16 mask, const __m512 (&acc)[T]) {
#pragma GCC unroll 12
  for (int t = 0; t < T; ++t) {
    if constexpr (kPartial) {
      _mm512_mask_storeu_ps(y + t * ys, mask, acc[t]);
    } else {
      _mm512_storeu_ps(y + t * ys, acc[t]);
    }
  }
}

}  // namespace
}  // namespace tokenmill::kernels
