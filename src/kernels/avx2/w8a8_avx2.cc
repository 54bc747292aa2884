// AVX2 W8A8 rows: per 32-element block, |w| (unsigned) times sign-adjusted
// activations with maddubs (pairs of int8 products summed to int16: at most
// 2 * 128 * 127 = 32512, no saturation), then madd with ones to 8 int32
// lanes; converted to float and scaled by the block's fp16 scale.
#include <immintrin.h>

#include "kernels/avx2/avx2.h"
#include "kernels/avx2/math_avx2.h"
#include "kernels/quant_blocks.h"
#include "kernels/w8a8.h"

namespace tokenmill::kernels::avx2 {
namespace {

template <int NT>
void rows_tile(const WeightView& w, int64_t row_begin, int64_t row_end, const int8_t* qx, const float* sx, float* y) {
  const int64_t nb = w.cols / kQK8_0;
  const auto* blocks = static_cast<const BlockQ8_0*>(w.data);
  const __m256i ones = _mm256_set1_epi16(1);
  for (int64_t r = row_begin; r < row_end; ++r) {
    const BlockQ8_0* row = blocks + r * nb;
    __m256 acc[NT];
    for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
      const __m256i qw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row[b].qs));
      const __m256i aw = _mm256_sign_epi8(qw, qw);
      const __m256 d = _mm256_cvtph_ps(_mm_set1_epi16(static_cast<short>(row[b].d)));
      for (int t = 0; t < NT; ++t) {
        const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qx + t * w.cols + b * kQK8_0));
        const __m256i p16 = _mm256_maddubs_epi16(aw, _mm256_sign_epi8(xv, qw));
        const __m256 p = _mm256_cvtepi32_ps(_mm256_madd_epi16(p16, ones));
        acc[t] = _mm256_fmadd_ps(d, p, acc[t]);
      }
    }
    for (int t = 0; t < NT; ++t) y[t * w.rows + r] = hsum(acc[t]) * sx[t];
  }
}

}  // namespace

void w8a8_rows(const WeightView& w, int64_t row_begin, int64_t row_end, const int8_t* qx, const float* sx,
               int64_t num_tokens, float* y) {
  switch (num_tokens) {
    case 1: return rows_tile<1>(w, row_begin, row_end, qx, sx, y);
    case 2: return rows_tile<2>(w, row_begin, row_end, qx, sx, y);
    case 3: return rows_tile<3>(w, row_begin, row_end, qx, sx, y);
    case 4: return rows_tile<4>(w, row_begin, row_end, qx, sx, y);
    default: __builtin_trap();  // matmul_w8a8 passes tiles of at most 4 tokens
  }
}

}  // namespace tokenmill::kernels::avx2
