// AVX2 versions of the ops in ops.h (see math_avx2.h for exp's accuracy).
// Tails use masked loads and stores, so the last partial vector goes through
// exactly the same arithmetic as the full ones.
#include <immintrin.h>
#include <math.h>

#include "kernels/avx2/avx2.h"
#include "kernels/avx2/math_avx2.h"
#include "kernels/dispatch.h"

namespace tokenmill::kernels::avx2 {
namespace {

// Applies out = f(a, b) lane-wise over n elements (b may be null: zeros).
template <class F>
void map2(float* out, const float* a, const float* b, int64_t n, F f) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 bv = b != nullptr ? _mm256_loadu_ps(b + i) : _mm256_setzero_ps();
    _mm256_storeu_ps(out + i, f(_mm256_loadu_ps(a + i), bv));
  }
  if (i < n) {
    const __m256i m = tail_mask(n - i);
    const __m256 bv = b != nullptr ? _mm256_maskload_ps(b + i, m) : _mm256_setzero_ps();
    _mm256_maskstore_ps(out + i, m, f(_mm256_maskload_ps(a + i, m), bv));
  }
}

}  // namespace

// Sum of squares in double (like the reference), so the only differences are
// the order of double additions and the final float products.
void rms_norm(const float* x, const float* w, float* out, int64_t n, float eps) {
  if (n <= 0) return;
  __m256d a0 = _mm256_setzero_pd(), a1 = _mm256_setzero_pd();
  __m256d a2 = _mm256_setzero_pd(), a3 = _mm256_setzero_pd();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    add_squares_pd(_mm256_loadu_ps(x + i), a0, a1);
    add_squares_pd(_mm256_loadu_ps(x + i + 8), a2, a3);
  }
  for (; i < n; i += 8) {
    add_squares_pd(_mm256_maskload_ps(x + i, tail_mask(n - i)), a0, a1);
  }
  const double sum_sq = hsum_pd(_mm256_add_pd(_mm256_add_pd(a0, a1), _mm256_add_pd(a2, a3)));
  const __m256 inv = _mm256_set1_ps(static_cast<float>(1.0 / sqrt(sum_sq / static_cast<double>(n) + eps)));
  if (w != nullptr) {
    map2(out, x, w, n, [inv](__m256 a, __m256 b) { return _mm256_mul_ps(_mm256_mul_ps(a, inv), b); });
  } else {
    map2(out, x, nullptr, n, [inv](__m256 a, __m256) { return _mm256_mul_ps(a, inv); });
  }
}

void swiglu(float* gate, const float* up, int64_t n) {
  map2(gate, gate, up, n, [](__m256 g, __m256 u) { return mul_sigmoid_ps(_mm256_mul_ps(g, u), g); });
}

// gelu_tanh(g) = 0.5 g (1 + tanh(k (g + 0.044715 g^3))) = g * sigmoid(2k g (1 + 0.044715 g^2)).
void geglu_tanh(float* gate, const float* up, int64_t n) {
  constexpr double kTwoK = 2.0 * 0.79788456080286535588;  // 2 * sqrt(2 / pi)
  const __m256 c1 = _mm256_set1_ps(static_cast<float>(kTwoK));
  const __m256 c2 = _mm256_set1_ps(static_cast<float>(kTwoK * 0.044715));
  map2(gate, gate, up, n, [c1, c2](__m256 g, __m256 u) {
    const __m256 z = _mm256_mul_ps(g, _mm256_fmadd_ps(c2, _mm256_mul_ps(g, g), c1));
    return mul_sigmoid_ps(_mm256_mul_ps(g, u), z);
  });
}

// Three passes: max, exp(x - max) with a double sum, scale by 1/sum.
void softmax(float* x, int64_t n) {
  if (n <= 0) return;
  const __m256 neg_inf = _mm256_set1_ps(-INFINITY);
  __m256 mv = neg_inf;
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) mv = _mm256_max_ps(mv, _mm256_loadu_ps(x + i));
  if (i < n) {
    const __m256i m = tail_mask(n - i);
    mv = _mm256_max_ps(mv, _mm256_blendv_ps(neg_inf, _mm256_maskload_ps(x + i, m), _mm256_castsi256_ps(m)));
  }
  const __m256 max_v = _mm256_set1_ps(hmax(mv));
  __m256d s0 = _mm256_setzero_pd(), s1 = _mm256_setzero_pd();
  for (i = 0; i + 8 <= n; i += 8) {
    const __m256 e = exp_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), max_v));
    _mm256_storeu_ps(x + i, e);
    add_pd(e, s0, s1);
  }
  if (i < n) {
    const __m256i m = tail_mask(n - i);
    __m256 e = exp_ps(_mm256_sub_ps(_mm256_maskload_ps(x + i, m), max_v));
    e = _mm256_and_ps(e, _mm256_castsi256_ps(m));
    _mm256_maskstore_ps(x + i, m, e);
    add_pd(e, s0, s1);
  }
  scale_inplace(x, static_cast<float>(1.0 / hsum_pd(_mm256_add_pd(s0, s1))), n);
}

void add_inplace(float* y, const float* x, int64_t n) {
  map2(y, y, x, n, [](__m256 a, __m256 b) { return _mm256_add_ps(a, b); });
}

void scale_inplace(float* x, float s, int64_t n) {
  const __m256 sv = _mm256_set1_ps(s);
  map2(x, x, nullptr, n, [sv](__m256 a, __m256) { return _mm256_mul_ps(a, sv); });
}

}  // namespace tokenmill::kernels::avx2
