// AVX2 activation quantization: the same arithmetic as quantize_acts_ref
// (scalar scale and reciprocal, one multiply and round-to-nearest-even per
// value), so it produces the same bits. See quantize_act.h.
#include <immintrin.h>

#include "kernels/avx2/avx2.h"
#include "kernels/avx2/math_avx2.h"
#include "kernels/quantize_act.h"

namespace tokenmill::kernels::avx2 {
namespace {

inline int32_t hsum_epi32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
  return _mm_cvtsi128_si32(s);
}

// 16 floats -> 16 int16 in order, and their sum.
inline __m256i round_pack(__m256 a, __m256 b, __m256 id, int32_t& sum) {
  const __m256 lo = _mm256_set1_ps(-32767.0f);
  const __m256 hi = _mm256_set1_ps(32767.0f);
  const int rnd = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
  // max(r, lo) returns lo for a NaN r, as fmax does in the reference.
  const __m256 ra = _mm256_min_ps(_mm256_max_ps(_mm256_round_ps(_mm256_mul_ps(a, id), rnd), lo), hi);
  const __m256 rb = _mm256_min_ps(_mm256_max_ps(_mm256_round_ps(_mm256_mul_ps(b, id), rnd), lo), hi);
  const __m256i ia = _mm256_cvtps_epi32(ra);
  const __m256i ib = _mm256_cvtps_epi32(rb);
  sum = hsum_epi32(_mm256_add_epi32(ia, ib));
  // packs works per 128-bit lane; the permute restores element order.
  return _mm256_permute4x64_epi64(_mm256_packs_epi32(ia, ib), 0xD8);
}

}  // namespace

void quantize_acts(const float* x, int64_t num_tokens, int64_t cols, const QuantizedActsOut& out) {
  const int64_t nb = num_tokens * cols / kActBlock;
  const __m256 sign = _mm256_set1_ps(-0.0f);
  for (int64_t b = 0; b < nb; ++b) {
    const float* xb = x + b * kActBlock;
    const __m256 v0 = _mm256_loadu_ps(xb);
    const __m256 v1 = _mm256_loadu_ps(xb + 8);
    const __m256 v2 = _mm256_loadu_ps(xb + 16);
    const __m256 v3 = _mm256_loadu_ps(xb + 24);
    const __m256 m = _mm256_max_ps(_mm256_max_ps(_mm256_andnot_ps(sign, v0), _mm256_andnot_ps(sign, v1)),
                                   _mm256_max_ps(_mm256_andnot_ps(sign, v2), _mm256_andnot_ps(sign, v3)));
    const float amax = hmax(m);
    const __m256 id = _mm256_set1_ps(amax > kActTiny ? 32767.0f / amax : 0.0f);
    int32_t sum0 = 0, sum1 = 0;
    int16_t* q = out.qs + b * kActBlock;
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(q), round_pack(v0, v1, id, sum0));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + 16), round_pack(v2, v3, id, sum1));
    const float d = amax / 32767.0f;
    out.d[b] = d;
    out.s32[b] = d * static_cast<float>(sum0 + sum1);
    out.s16[2 * b] = d * static_cast<float>(sum0);
    out.s16[2 * b + 1] = d * static_cast<float>(sum1);
  }
}

}  // namespace tokenmill::kernels::avx2
