// AVX-512 paged attention for one (token, KV head) pair and up to
// kMaxPagedGroup query heads, F32 and F16 caches, head_dim a multiple of 16
// and no soft-capping; other calls go to the AVX2 kernel.
//
// The AVX2 kernel dots each K row with each head's query along head_dim and
// sums the lanes of every (key, head) pair. Here the keys are taken 16 at a
// time and transposed once (16 x 16 float blocks), so that one vector holds
// dimension d of 16 keys; each head's scores for the 16 keys then build up
// lane-wise, one FMA per dimension with the query element broadcast, with
// no horizontal sums, and come out as the rows of the softmax. V is
// accumulated as in the AVX2 kernel: per 32-column slice, the chunk's rows
// pass over every head's output in registers.
//
// Online softmax per chunk of 64 keys as in the AVX2 kernel. Each head's
// operations do not depend on the number of heads in the call, so results
// do not depend on how a group is split (nor on the thread count).
#include <immintrin.h>
#include <math.h>

#include "kernels/avx2/avx2.h"
#include "kernels/avx512/avx512.h"
#include "kernels/dispatch.h"

namespace tokenmill::kernels::avx512 {
namespace {

constexpr int64_t kChunk = 64;  // keys per softmax step (scores on the stack, per head)
constexpr int64_t kKeys = 16;   // keys per transposed block
constexpr int64_t kMaxHeadDim = 256;

// Full-mask forms: GCC 12's unmasked ones read an undefined vector and warn.
constexpr __mmask16 kAll16 = 0xFFFF;
constexpr __mmask8 kAll8 = 0xFF;
inline __m512 unpacklo(__m512 a, __m512 b) { return _mm512_maskz_unpacklo_ps(kAll16, a, b); }
inline __m512 unpackhi(__m512 a, __m512 b) { return _mm512_maskz_unpackhi_ps(kAll16, a, b); }
inline __m512 unpacklo64(__m512 a, __m512 b) {
  return _mm512_castpd_ps(_mm512_maskz_unpacklo_pd(kAll8, _mm512_castps_pd(a), _mm512_castps_pd(b)));
}
inline __m512 unpackhi64(__m512 a, __m512 b) {
  return _mm512_castpd_ps(_mm512_maskz_unpackhi_pd(kAll8, _mm512_castps_pd(a), _mm512_castps_pd(b)));
}
inline __m512 min(__m512 a, __m512 b) { return _mm512_maskz_min_ps(kAll16, a, b); }
inline __m512 max(__m512 a, __m512 b) { return _mm512_maskz_max_ps(kAll16, a, b); }

// Horizontal max and sum of the 16 lanes.
template <int kHalf>
inline __m256 half(__m512 v) {
  return _mm256_castpd_ps(_mm512_maskz_extractf64x4_pd(static_cast<__mmask8>(0xF), _mm512_castps_pd(v), kHalf));
}
inline float hmax(__m512 v) {
  __m256 h = _mm256_max_ps(half<0>(v), half<1>(v));
  __m128 x = _mm_max_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
  x = _mm_max_ps(x, _mm_movehl_ps(x, x));
  x = _mm_max_ss(x, _mm_shuffle_ps(x, x, 1));
  return _mm_cvtss_f32(x);
}
inline float hsum(__m512 v) {
  __m256 h = _mm256_add_ps(half<0>(v), half<1>(v));
  __m128 x = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
  x = _mm_add_ps(x, _mm_movehl_ps(x, x));
  x = _mm_add_ss(x, _mm_shuffle_ps(x, x, 1));
  return _mm_cvtss_f32(x);
}

// e^x, as exp_ps in math_avx2.h (same range reduction and polynomial).
inline __m512 exp_ps(__m512 x) {
  x = min(max(x, _mm512_set1_ps(-87.3f)), _mm512_set1_ps(88.3f));
  const __m512 n = _mm512_maskz_roundscale_ps(kAll16, _mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                              _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.0f / 5040.0f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 720.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  const __m512i bits = _mm512_maskz_slli_epi32(
      kAll16, _mm512_add_epi32(_mm512_maskz_cvtps_epi32(kAll16, n), _mm512_set1_epi32(127)), 23);
  return _mm512_mul_ps(p, _mm512_castsi512_ps(bits));
}

// 16 elements of a row from element d on, as floats.
template <bool kF16>
inline __m512 load16(const uint8_t* row, int64_t d) {
  if constexpr (kF16) {
    return _mm512_maskz_cvtph_ps(static_cast<__mmask16>(0xFFFF),
                                 _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 2 * d)));
  } else {
    return _mm512_loadu_ps(reinterpret_cast<const float*>(row) + d);
  }
}

// 128-bit lanes 0 and 2 (kEven) or 1 and 3 of a, then the same of b.
template <bool kEven>
inline __m512 lanes(__m512 a, __m512 b) {
  return _mm512_maskz_shuffle_f32x4(kAll16, a, b, kEven ? 0x88 : 0xDD);
}

// In place: r[i] becomes column i of the 16 x 16 block whose rows were
// r[0..15] (4 x 4 blocks inside 128-bit lanes, then the lanes).
inline void transpose16(__m512 (&r)[16]) {
  __m512 a[16], b[16];
  for (int k = 0; k < 8; ++k) {
    a[2 * k] = unpacklo(r[2 * k], r[2 * k + 1]);
    a[2 * k + 1] = unpackhi(r[2 * k], r[2 * k + 1]);
  }
  for (int k = 0; k < 4; ++k) {
    b[4 * k] = unpacklo64(a[4 * k], a[4 * k + 2]);
    b[4 * k + 1] = unpackhi64(a[4 * k], a[4 * k + 2]);
    b[4 * k + 2] = unpacklo64(a[4 * k + 1], a[4 * k + 3]);
    b[4 * k + 3] = unpackhi64(a[4 * k + 1], a[4 * k + 3]);
  }
  // b[4 k + j], 128-bit lane L: column 4 L + j of rows 4 k .. 4 k + 3.
  for (int j = 0; j < 4; ++j) {
    a[j] = lanes<true>(b[j], b[4 + j]);       // columns j, 8 + j of rows 0..7
    a[4 + j] = lanes<false>(b[j], b[4 + j]);  // columns 4 + j, 12 + j of rows 0..7
    a[8 + j] = lanes<true>(b[8 + j], b[12 + j]);
    a[12 + j] = lanes<false>(b[8 + j], b[12 + j]);
  }
  for (int j = 0; j < 4; ++j) {
    r[j] = lanes<true>(a[j], a[8 + j]);
    r[8 + j] = lanes<false>(a[j], a[8 + j]);
    r[4 + j] = lanes<true>(a[4 + j], a[12 + j]);
    r[12 + j] = lanes<false>(a[4 + j], a[12 + j]);
  }
}

// kt[d * 16 + i] = element d of K row i, for the n (<= 16) rows of a block
// (missing rows are zeros).
template <bool kF16>
void transpose_keys(const uint8_t* const* rows, int64_t n, int64_t head_dim, float* kt) {
  for (int64_t d0 = 0; d0 < head_dim; d0 += 16) {
    __m512 r[16];
    for (int64_t i = 0; i < 16; ++i) r[i] = i < n ? load16<kF16>(rows[i], d0) : _mm512_setzero_ps();
    transpose16(r);
    for (int64_t d = 0; d < 16; ++d) _mm512_store_ps(kt + (d0 + d) * kKeys, r[d]);
  }
}

// s[g][0..16) = scale * q[g] . k_i for the 16 keys of a transposed block.
// Two chains per head (even and odd dimensions) whatever G is.
template <int G>
inline void score_block(const float* q, int64_t head_dim, const float* kt, float scale, float* s, int64_t s_stride) {
  __m512 acc0[G], acc1[G];
  for (int g = 0; g < G; ++g) acc0[g] = acc1[g] = _mm512_setzero_ps();
  for (int64_t d = 0; d < head_dim; d += 2) {
    const __m512 k0 = _mm512_load_ps(kt + d * kKeys);
    const __m512 k1 = _mm512_load_ps(kt + (d + 1) * kKeys);
#pragma GCC unroll 8
    for (int g = 0; g < G; ++g) {
      acc0[g] = _mm512_fmadd_ps(_mm512_set1_ps(q[g * head_dim + d]), k0, acc0[g]);
      acc1[g] = _mm512_fmadd_ps(_mm512_set1_ps(q[g * head_dim + d + 1]), k1, acc1[g]);
    }
  }
  const __m512 sv = _mm512_set1_ps(scale);
  for (int g = 0; g < G; ++g) _mm512_storeu_ps(s + g * s_stride, _mm512_mul_ps(_mm512_add_ps(acc0[g], acc1[g]), sv));
}

// out[g] += sum_i p[g][i] * v_i over the n V rows of a chunk, in key
// order, 32 (then 16) columns at a time with every head's slice in
// registers.
template <int G, bool kF16>
inline void axpy_chunk(const float (&p)[G][kChunk], const uint8_t* const* v_rows, int64_t n, int64_t head_dim,
                       float* out) {
  int64_t d = 0;
  for (; d + 32 <= head_dim; d += 32) {
    __m512 acc[G][2];
    for (int g = 0; g < G; ++g) {
      acc[g][0] = _mm512_loadu_ps(out + g * head_dim + d);
      acc[g][1] = _mm512_loadu_ps(out + g * head_dim + d + 16);
    }
    for (int64_t i = 0; i < n; ++i) {
      const __m512 x0 = load16<kF16>(v_rows[i], d);
      const __m512 x1 = load16<kF16>(v_rows[i], d + 16);
#pragma GCC unroll 8
      for (int g = 0; g < G; ++g) {
        const __m512 pg = _mm512_set1_ps(p[g][i]);
        acc[g][0] = _mm512_fmadd_ps(pg, x0, acc[g][0]);
        acc[g][1] = _mm512_fmadd_ps(pg, x1, acc[g][1]);
      }
    }
    for (int g = 0; g < G; ++g) {
      _mm512_storeu_ps(out + g * head_dim + d, acc[g][0]);
      _mm512_storeu_ps(out + g * head_dim + d + 16, acc[g][1]);
    }
  }
  if (d < head_dim) {  // 16 columns left
    __m512 acc[G];
    for (int g = 0; g < G; ++g) acc[g] = _mm512_loadu_ps(out + g * head_dim + d);
    for (int64_t i = 0; i < n; ++i) {
      const __m512 x = load16<kF16>(v_rows[i], d);
      for (int g = 0; g < G; ++g) acc[g] = _mm512_fmadd_ps(_mm512_set1_ps(p[g][i]), x, acc[g]);
    }
    for (int g = 0; g < G; ++g) _mm512_storeu_ps(out + g * head_dim + d, acc[g]);
  }
}

inline void scale_row(float* x, float s, int64_t n) {
  const __m512 sv = _mm512_set1_ps(s);
  for (int64_t d = 0; d < n; d += 16) _mm512_storeu_ps(x + d, _mm512_mul_ps(_mm512_loadu_ps(x + d), sv));
}

// Online-softmax step of one head over the n scores of a chunk (w, in place
// becoming the weights e^(s - m)); rescales the head's state and output
// when the maximum grows.
inline void softmax_step(float* w, int64_t n, float& m, float& l, float* out, int64_t head_dim) {
  __m512 mx = _mm512_set1_ps(-INFINITY);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 k = n - i >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << (n - i)) - 1u);
    mx = _mm512_mask_max_ps(mx, k, mx, _mm512_loadu_ps(w + i));
  }
  const float chunk_max = hmax(mx);
  if (chunk_max > m) {
    const float keep = expf(m - chunk_max);  // 0 for the first chunk (m = -inf)
    l *= keep;
    __asm__("" : "+x"(l));  // no FMA with the sum added below (see paged_attention_avx2.cc)
    scale_row(out, keep, head_dim);
    m = chunk_max;
  }
  const __m512 shift = _mm512_set1_ps(m);
  __m512 sum = _mm512_setzero_ps();
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 k = n - i >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << (n - i)) - 1u);
    const __m512 e = _mm512_maskz_mov_ps(k, exp_ps(_mm512_sub_ps(_mm512_loadu_ps(w + i), shift)));
    _mm512_storeu_ps(w + i, e);
    sum = _mm512_add_ps(sum, e);
  }
  l += hsum(sum);
}

// w[i] = exp(w[i] - m) * inv for i < n: a head's kept scores become its
// final softmax weights.
inline void normalize_weights(float* w, int64_t n, float m, float inv) {
  const __m512 sh = _mm512_set1_ps(m);
  const __m512 sc = _mm512_set1_ps(inv);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 k = n - i >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << (n - i)) - 1u);
    const __m512 e = exp_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, w + i), sh));
    _mm512_mask_storeu_ps(w + i, k, _mm512_mul_ps(e, sc));
  }
}

template <int G, bool kF16>
void attend_group(const PagedKv& kv, const int32_t* table, int64_t kv_head, const float* q, int64_t j_begin,
                  int64_t j_end, int64_t head_dim, float scale, float* out, float* kept) {
  const int64_t len = j_end - j_begin;
  const int64_t elem = kF16 ? 2 : 4;
  const int64_t row_bytes = kv.n_kv_dim * elem;
  const int64_t head_offset = kv_head * head_dim * elem;
  alignas(64) float kt[kMaxHeadDim * kKeys];
  const uint8_t* k_rows[kChunk];
  const uint8_t* v_rows[kChunk];
  alignas(64) float weights[G][kChunk];  // [head, key]
  float m[G], l[G];
  for (int g = 0; g < G; ++g) m[g] = -INFINITY, l[g] = 0.0f;
  for (int64_t d = 0; d < G * head_dim; ++d) out[d] = 0.0f;
  for (int64_t j0 = j_begin; j0 < j_end; j0 += kChunk) {
    const int64_t n = j_end - j0 < kChunk ? j_end - j0 : kChunk;
    paged_chunk_rows(kv, table, j0, n, row_bytes, head_offset, k_rows, v_rows);
    for (int64_t i0 = 0; i0 < n; i0 += kKeys) {
      transpose_keys<kF16>(k_rows + i0, n - i0 < kKeys ? n - i0 : kKeys, head_dim, kt);
      score_block<G>(q, head_dim, kt, scale, &weights[0][i0], kChunk);
    }
    if (kept != nullptr)
      for (int g = 0; g < G; ++g) __builtin_memcpy(kept + g * len + (j0 - j_begin), weights[g], sizeof(float) * n);
    for (int g = 0; g < G; ++g) softmax_step(weights[g], n, m[g], l[g], out + g * head_dim, head_dim);
    axpy_chunk<G, kF16>(weights, v_rows, n, head_dim, out);
  }
  for (int g = 0; g < G; ++g) {
    const float inv = l[g] > 0.0f ? 1.0f / l[g] : 0.0f;
    scale_row(out + g * head_dim, inv, head_dim);
    if (kept != nullptr) normalize_weights(kept + g * len, len, m[g], inv);
  }
}

using GroupKernel = void (*)(const PagedKv&, const int32_t*, int64_t, const float*, int64_t, int64_t, int64_t, float,
                             float*, float*);

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
                        int64_t num_heads, int64_t j_begin, int64_t j_end, int64_t head_dim, float scale, float softcap,
                        float* out, float* weights) {
  static_assert(kMaxPagedGroup == 8, "pick() covers 1..8 heads");
  const bool dense = kv.dtype == kv::KvDtype::F32 || kv.dtype == kv::KvDtype::F16;
  if (!dense || softcap > 0.0f || head_dim % 16 != 0 || head_dim > kMaxHeadDim) {
    return avx2::paged_attend_group(kv, block_table, kv_head, q, num_heads, j_begin, j_end, head_dim, scale, softcap,
                                    out, weights);
  }
  const GroupKernel kernel = kv.dtype == kv::KvDtype::F16 ? pick<true>(num_heads) : pick<false>(num_heads);
  if (kernel == nullptr) __builtin_trap();  // the driver never passes more than kMaxPagedGroup heads
  kernel(kv, block_table, kv_head, q, j_begin, j_end, head_dim, scale, out, weights);
}

}  // namespace tokenmill::kernels::avx512
