// AVX2 paged attention for one (token, KV head) pair and up to
// kMaxPagedGroup query heads. Keys are taken in chunks of kChunk positions
// (which may span several blocks): the chunk's row addresses are looked up
// in the block table, each K row is loaded (F16 rows converted with F16C)
// once and dotted with every head's query, the per-head online-softmax state
// is rescaled once per chunk, and each V row is loaded once and accumulated
// into every head's output. Per head, the operations are the same whatever
// the number of heads in the call, so results do not depend on how a group
// is split.
#include <immintrin.h>
#include <math.h>

#include "kernels/dispatch.h"
#include "kernels/math_avx2.h"

namespace tokenmill::kernels::avx2 {
namespace {

constexpr int64_t kChunk = 64;  // scores kept on the stack, per head

// 8 elements of a row from element d on, as floats.
template <bool kF16>
inline __m256 load8(const uint8_t* row, int64_t d) {
  if constexpr (kF16) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * d)));
  } else {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(row) + d);
  }
}

// The last n (< 8) elements from element d on; the other lanes are 0.
template <bool kF16>
inline __m256 load_tail(const uint8_t* row, int64_t d, int64_t n) {
  if constexpr (kF16) {
    alignas(16) uint16_t h[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    const uint16_t* src = reinterpret_cast<const uint16_t*>(row) + d;
    for (int64_t i = 0; i < n; ++i) h[i] = src[i];
    return _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(h)));
  } else {
    return _mm256_maskload_ps(reinterpret_cast<const float*>(row) + d, tail_mask(n));
  }
}

// s[g] = q[g] . k over head_dim for g < G. Two accumulator chains per head
// (elements d and d + 8 of each 16) hide the FMA latency; the K row is read
// once for all heads.
template <int G, bool kF16>
inline void dot_group(const float* q, int64_t head_dim, const uint8_t* k, float* s) {
  __m256 acc0[G], acc1[G];
  for (int g = 0; g < G; ++g) acc0[g] = acc1[g] = _mm256_setzero_ps();
  int64_t d = 0;
  for (; d + 16 <= head_dim; d += 16) {
    const __m256 k0 = load8<kF16>(k, d);
    const __m256 k1 = load8<kF16>(k, d + 8);
    for (int g = 0; g < G; ++g) {
      acc0[g] = _mm256_fmadd_ps(_mm256_loadu_ps(q + g * head_dim + d), k0, acc0[g]);
      acc1[g] = _mm256_fmadd_ps(_mm256_loadu_ps(q + g * head_dim + d + 8), k1, acc1[g]);
    }
  }
  if (d + 8 <= head_dim) {
    const __m256 k0 = load8<kF16>(k, d);
    for (int g = 0; g < G; ++g) acc0[g] = _mm256_fmadd_ps(_mm256_loadu_ps(q + g * head_dim + d), k0, acc0[g]);
    d += 8;
  }
  if (d < head_dim) {
    const __m256i m = tail_mask(head_dim - d);
    const __m256 k1 = load_tail<kF16>(k, d, head_dim - d);
    for (int g = 0; g < G; ++g) acc1[g] = _mm256_fmadd_ps(_mm256_maskload_ps(q + g * head_dim + d, m), k1, acc1[g]);
  }
  for (int g = 0; g < G; ++g) s[g] = hsum(_mm256_add_ps(acc0[g], acc1[g]));
}

// out[g] += p[g] * v over head_dim for g < G; the V row is read once.
template <int G, bool kF16>
inline void axpy_group(const float* p, const uint8_t* v, int64_t head_dim, float* out) {
  __m256 pv[G];
  for (int g = 0; g < G; ++g) pv[g] = _mm256_set1_ps(p[g]);
  int64_t d = 0;
  for (; d + 8 <= head_dim; d += 8) {
    const __m256 x = load8<kF16>(v, d);
    for (int g = 0; g < G; ++g) {
      float* o = out + g * head_dim + d;
      _mm256_storeu_ps(o, _mm256_fmadd_ps(pv[g], x, _mm256_loadu_ps(o)));
    }
  }
  if (d < head_dim) {
    const __m256i m = tail_mask(head_dim - d);
    const __m256 x = load_tail<kF16>(v, d, head_dim - d);
    for (int g = 0; g < G; ++g) {
      float* o = out + g * head_dim + d;
      _mm256_maskstore_ps(o, m, _mm256_fmadd_ps(pv[g], x, _mm256_maskload_ps(o, m)));
    }
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

template <int G, bool kF16>
void attend_group(const PagedKv& kv, const int32_t* table, int64_t kv_head, const float* q, int64_t j_begin,
                  int64_t j_end, int64_t head_dim, float scale, float softcap, float* out) {
  const int64_t elem = kF16 ? 2 : 4;
  const int64_t row_bytes = kv.n_kv_dim * elem;
  const int64_t head_offset = kv_head * head_dim * elem;
  const int64_t bs = kv.block_size;
  const uint8_t* k_rows[kChunk];
  const uint8_t* v_rows[kChunk];
  float scores[kChunk][G];  // [key, head]
  float weights[G][kChunk];  // [head, key]
  float m[G], l[G];
  for (int g = 0; g < G; ++g) m[g] = -INFINITY, l[g] = 0.0f;
  for (int64_t d = 0; d < G * head_dim; ++d) out[d] = 0.0f;
  for (int64_t j0 = j_begin; j0 < j_end; j0 += kChunk) {
    const int64_t n = j_end - j0 < kChunk ? j_end - j0 : kChunk;
    for (int64_t i = 0; i < n; ++i) {
      const int64_t j = j0 + i;
      const int64_t row = static_cast<int64_t>(table[j / bs]) * bs + j % bs;
      k_rows[i] = kv.k + row * row_bytes + head_offset;
      v_rows[i] = kv.v + row * row_bytes + head_offset;
    }
    for (int64_t i = 0; i < n; ++i) dot_group<G, kF16>(q, head_dim, k_rows[i], scores[i]);
    for (int g = 0; g < G; ++g) {
      float chunk_max = -INFINITY;
      for (int64_t i = 0; i < n; ++i) {
        float s = scores[i][g] * scale;
        if (softcap > 0.0f) s = softcap * tanhf(s / softcap);
        weights[g][i] = s;
        chunk_max = s > chunk_max ? s : chunk_max;
      }
      if (chunk_max > m[g]) {  // rescale the previous chunks' state to the new max
        const float keep = expf(m[g] - chunk_max);  // 0 for the first chunk (m = -inf)
        l[g] *= keep;
        scale_inplace(out + g * head_dim, keep, head_dim);
        m[g] = chunk_max;
      }
      l[g] += exp_shift_sum(weights[g], n, m[g]);
    }
    for (int64_t i = 0; i < n; ++i) {
      float p[G];
      for (int g = 0; g < G; ++g) p[g] = weights[g][i];
      axpy_group<G, kF16>(p, v_rows[i], head_dim, out);
    }
  }
  for (int g = 0; g < G; ++g) scale_inplace(out + g * head_dim, l[g] > 0.0f ? 1.0f / l[g] : 0.0f, head_dim);
}

using GroupKernel = void (*)(const PagedKv&, const int32_t*, int64_t, const float*, int64_t, int64_t,
                             int64_t, float, float, float*);

template <bool kF16>
GroupKernel pick(int64_t num_heads) {
  switch (num_heads) {
    case 1: return attend_group<1, kF16>;
    case 2: return attend_group<2, kF16>;
    case 3: return attend_group<3, kF16>;
    case 4: return attend_group<4, kF16>;
    case 5: return attend_group<5, kF16>;
    case 6: return attend_group<6, kF16>;
    case 7: return attend_group<7, kF16>;
    case 8: return attend_group<8, kF16>;
    default: return nullptr;
  }
}

}  // namespace

void paged_attend_group(const PagedKv& kv, const int32_t* block_table, int64_t kv_head, const float* q,
                        int64_t num_heads, int64_t j_begin, int64_t j_end, int64_t head_dim, float scale,
                        float softcap, float* out) {
  static_assert(kMaxPagedGroup == 8, "pick() covers 1..8 heads");
  const GroupKernel kernel = kv.dtype == kv::KvDtype::F16 ? pick<true>(num_heads) : pick<false>(num_heads);
  if (kernel == nullptr) __builtin_trap();  // the driver never passes more than kMaxPagedGroup heads
  kernel(kv, block_table, kv_head, q, j_begin, j_end, head_dim, scale, softcap, out);
}

}  // namespace tokenmill::kernels::avx2
