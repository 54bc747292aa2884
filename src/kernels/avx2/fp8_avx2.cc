// AVX2 FP8 (E4M3) weight products. An E4M3 byte S.EEEE.MMM becomes the FP16
// bits S.0EEEE.MMM0000000 (exponent field shifted into FP16's, subnormals
// included), whose value is the E4M3 value times 2^-8 (the bias difference
// 15 - 7); F16C converts that to FP32, and the 2^8 goes into the block scale.
#include <immintrin.h>

#include "kernels/avx2/avx2.h"
#include "kernels/avx2/math_avx2.h"
#include "kernels/fp8.h"

namespace tokenmill::kernels::avx2 {
namespace {

// 2^k as a float for k in [-126, 127] (built from the exponent bits).
inline float pow2(int k) {
  const uint32_t bits = static_cast<uint32_t>(k + 127) << 23;
  float f;
  __builtin_memcpy(&f, &bits, 4);
  return f;
}

// 8 E4M3 bytes -> 8 floats times 2^-8.
inline __m256 load8_fp8(const uint8_t* p) {
  const __m128i b = _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
  const __m128i sign = _mm_slli_epi16(_mm_and_si128(b, _mm_set1_epi16(0x80)), 8);
  const __m128i mag = _mm_slli_epi16(_mm_and_si128(b, _mm_set1_epi16(0x7F)), 7);
  return _mm256_cvtph_ps(_mm_or_si128(sign, mag));
}

// 16 E4M3 bytes -> FP16 bits (times 2^-8) in 16 lanes: x = b << 7 puts the
// magnitude in bits 13..7 and the sign in bit 14; adding bit 14 to itself
// carries it into bit 15.
inline __m256i fp8x16_to_fp16(const uint8_t* p) {
  const __m256i x = _mm256_slli_epi16(_mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))), 7);
  return _mm256_add_epi16(x, _mm256_and_si256(x, _mm256_set1_epi16(0x4000)));
}

template <int NT>
void rows_tile(const Fp8Matrix& w, int64_t row_begin, int64_t row_end, const float* x, float* y) {
  const int64_t nb = w.cols / kFp8Block;
  for (int64_t r = row_begin; r < row_end; ++r) {
    const Fp8Block* row = w.blocks + r * nb;
    __m256 acc[NT];
    for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
      // Unscaled block products first, then one multiply-add by the scale.
      const __m256 scale = _mm256_set1_ps(pow2(row[b].exp + 8));
      const __m256i h0 = fp8x16_to_fp16(row[b].qs);
      const __m256i h1 = fp8x16_to_fp16(row[b].qs + 16);
      const __m256 w0 = _mm256_cvtph_ps(_mm256_castsi256_si128(h0));
      const __m256 w1 = _mm256_cvtph_ps(_mm256_extracti128_si256(h0, 1));
      const __m256 w2 = _mm256_cvtph_ps(_mm256_castsi256_si128(h1));
      const __m256 w3 = _mm256_cvtph_ps(_mm256_extracti128_si256(h1, 1));
      for (int t = 0; t < NT; ++t) {
        const float* xb = x + t * w.cols + b * kFp8Block;
        __m256 s = _mm256_mul_ps(w0, _mm256_loadu_ps(xb));
        s = _mm256_fmadd_ps(w1, _mm256_loadu_ps(xb + 8), s);
        s = _mm256_fmadd_ps(w2, _mm256_loadu_ps(xb + 16), s);
        s = _mm256_fmadd_ps(w3, _mm256_loadu_ps(xb + 24), s);
        acc[t] = _mm256_fmadd_ps(s, scale, acc[t]);
      }
    }
    for (int t = 0; t < NT; ++t) y[t * w.rows + r] = hsum(acc[t]);
  }
}

}  // namespace

void matmul_fp8_rows(const Fp8Matrix& w, int64_t row_begin, int64_t row_end, const float* x, int64_t num_tokens,
                     float* y) {
  switch (num_tokens) {
    case 1: return rows_tile<1>(w, row_begin, row_end, x, y);
    case 2: return rows_tile<2>(w, row_begin, row_end, x, y);
    case 3: return rows_tile<3>(w, row_begin, row_end, x, y);
    case 4: return rows_tile<4>(w, row_begin, row_end, x, y);
    default: __builtin_trap();  // matmul_fp8 passes tiles of at most 4 tokens
  }
}

void fp8_to_fp32_scaled(const uint8_t* src, float scale, float* dst, int64_t n) {
  const __m256 s = _mm256_set1_ps(scale * 256.0f);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, _mm256_mul_ps(load8_fp8(src + i), s));
  if (i < n) {
    alignas(8) uint8_t tmp[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int64_t j = 0; j < n - i; ++j) tmp[j] = src[i + j];
    alignas(32) float out[8];
    _mm256_store_ps(out, _mm256_mul_ps(load8_fp8(tmp), s));
    for (int64_t j = 0; j < n - i; ++j) dst[i + j] = out[j];
  }
}

}  // namespace tokenmill::kernels::avx2
