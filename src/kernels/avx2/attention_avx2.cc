// AVX2 per-(token, head) attention: online softmax over chunks of keys. Each
// chunk's scores are computed first (dot over head_dim), the running state is
// rescaled once per chunk if its maximum grew, then the chunk's exp weights
// are accumulated into `out` (axpy over head_dim).
#include <immintrin.h>
#include <math.h>

#include "kernels/avx2/avx2.h"
#include "kernels/avx2/math_avx2.h"
#include "kernels/dispatch.h"

namespace tokenmill::kernels::avx2 {
namespace {

constexpr int64_t kChunk = 64;  // scores kept on the stack

float dot(const float* a, const float* b, int64_t n) {
  __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
  __m256 s2 = _mm256_setzero_ps(), s3 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
    s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), s1);
    s2 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 16), _mm256_loadu_ps(b + i + 16), s2);
    s3 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 24), _mm256_loadu_ps(b + i + 24), s3);
  }
  for (; i < n; i += 8) {
    const __m256i m = tail_mask(n - i);
    s0 = _mm256_fmadd_ps(_mm256_maskload_ps(a + i, m), _mm256_maskload_ps(b + i, m), s0);
  }
  return hsum(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
}

// y[i] = y[i] * keep + a * x[i]
void scale_axpy(float keep, float a, const float* x, float* y, int64_t n) {
  const __m256 kv = _mm256_set1_ps(keep);
  const __m256 av = _mm256_set1_ps(a);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(y + i, _mm256_fmadd_ps(av, _mm256_loadu_ps(x + i), _mm256_mul_ps(kv, _mm256_loadu_ps(y + i))));
  }
  if (i < n) {
    const __m256i m = tail_mask(n - i);
    const __m256 r = _mm256_fmadd_ps(av, _mm256_maskload_ps(x + i, m), _mm256_mul_ps(kv, _mm256_maskload_ps(y + i, m)));
    _mm256_maskstore_ps(y + i, m, r);
  }
}

// s[i] = exp(s[i] - shift) for i < n (n <= kChunk); returns their sum.
float exp_shift_sum(float* s, int64_t n, float shift) {
  const __m256 sh = _mm256_set1_ps(shift);
  __m256 sum = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 e = exp_ps(_mm256_sub_ps(_mm256_loadu_ps(s + i), sh));
    _mm256_storeu_ps(s + i, e);
    sum = _mm256_add_ps(sum, e);
  }
  if (i < n) {
    const __m256i m = tail_mask(n - i);
    const __m256 e = _mm256_and_ps(exp_ps(_mm256_sub_ps(_mm256_maskload_ps(s + i, m), sh)), _mm256_castsi256_ps(m));
    _mm256_maskstore_ps(s + i, m, e);
    sum = _mm256_add_ps(sum, e);
  }
  return hsum(sum);
}

}  // namespace

void attend_head(const float* q, const float* k, const float* v, int64_t kv_stride, int64_t j_begin, int64_t j_end,
                 int64_t head_dim, float scale, float softcap, float* out) {
  float scores[kChunk];
  float m = -INFINITY;
  float l = 0.0f;
  for (int64_t d = 0; d < head_dim; ++d) out[d] = 0.0f;
  for (int64_t j0 = j_begin; j0 < j_end; j0 += kChunk) {
    const int64_t n = j_end - j0 < kChunk ? j_end - j0 : kChunk;
    float chunk_max = -INFINITY;
    for (int64_t i = 0; i < n; ++i) {
      float s = dot(q, k + (j0 + i) * kv_stride, head_dim) * scale;
      if (softcap > 0.0f) s = softcap * tanhf(s / softcap);
      scores[i] = s;
      chunk_max = s > chunk_max ? s : chunk_max;
    }
    float keep = 1.0f;  // rescales the previous chunks' state to the new max
    if (chunk_max > m) {
      keep = expf(m - chunk_max);  // 0 for the first chunk (m = -inf)
      l *= keep;
      m = chunk_max;
    }
    l += exp_shift_sum(scores, n, m);
    for (int64_t i = 0; i < n; ++i) {
      scale_axpy(i == 0 ? keep : 1.0f, scores[i], v + (j0 + i) * kv_stride, out, head_dim);
    }
  }
  scale_inplace(out, l > 0.0f ? 1.0f / l : 0.0f, head_dim);
}

}  // namespace tokenmill::kernels::avx2
