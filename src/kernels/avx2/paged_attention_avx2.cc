// AVX2 paged attention for one (token, KV head) pair and up to
// kMaxPagedGroup query heads. Keys are taken in chunks of kChunk positions
// (which may span several blocks): the chunk's row addresses are looked up
// in the block table, each K row is loaded (F16 rows converted with F16C)
// once and dotted with every head's query, the per-head online-softmax state
// is rescaled once per chunk, and each V row is loaded once and accumulated
// into every head's output. With a `weights` output the chunk's scores are
// kept there and turned into softmax weights at the end. Quantized caches (Q8_0, FP8 E4M3, Q4_0; layout in
// kv/kv_dtype.h) are dequantized here, one chunk of K and V rows of the head
// at a time, into stack buffers that the F32 path then reads. Per head, the operations are the same whatever
// the number of heads in the call, so results do not depend on how a group
// is split.
#include <immintrin.h>
#include <math.h>

#include "kernels/avx2/avx2.h"
#include "kernels/avx2/math_avx2.h"
#include "kernels/dispatch.h"

namespace tokenmill::kernels::avx2 {
namespace {

constexpr int64_t kChunk = 64;  // scores kept on the stack, per head
// Floats of dequantized K (and as many of V) per chunk of a quantized cache;
// the chunk shrinks to fit (head_dim <= kQuantBuffer is checked by the driver).
constexpr int64_t kQuantBuffer = 8192;

enum class Mode { kF32, kF16, kQ8_0, kFp8, kQ4_0 };

// The layout of kv/kv_dtype.h, restated here because this file may not call
// inline functions shared with other files (see dispatch.h).
int64_t quant_group(int64_t n_kv_dim) { return n_kv_dim % 32 == 0 ? 32 : n_kv_dim; }
template <Mode kMode>
int64_t group_bytes(int64_t group) {
  return 2 + (kMode == Mode::kQ4_0 ? group / 2 : group);
}
template <Mode kMode>
int64_t quant_row_bytes(int64_t n_kv_dim) {
  return n_kv_dim / quant_group(n_kv_dim) * group_bytes<kMode>(quant_group(n_kv_dim));
}

// 8 Q4_0 codes from nibbles of 8 bytes (the low ones, or with kHigh the high
// ones) -> 8 floats, code - 8.
template <bool kHigh>
inline __m256 load8_q4(const uint8_t* p) {
  __m256i b = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
  if constexpr (kHigh) b = _mm256_srli_epi32(b, 4);
  const __m256i q = _mm256_sub_epi32(_mm256_and_si256(b, _mm256_set1_epi32(0x0F)), _mm256_set1_epi32(8));
  return _mm256_cvtepi32_ps(q);
}

// Elements [in, in + len) of one Q4_0 group of `group` (codes at `codes`)
// times d. Whole halves of a group go 8 at a time; the rest one by one.
void dequant_q4(const uint8_t* codes, int64_t group, int64_t in, int64_t len, float d, float* dst) {
  const int64_t half = group / 2;
  const __m256 s = _mm256_set1_ps(d);
  int64_t j = 0;
  while (j < len) {
    const int64_t e = in + j;
    const bool high = e >= half;
    const int64_t byte = high ? e - half : e;
    if (len - j >= 8 && half - byte >= 8) {
      const __m256 q = high ? load8_q4<true>(codes + byte) : load8_q4<false>(codes + byte);
      _mm256_storeu_ps(dst + j, _mm256_mul_ps(q, s));
      j += 8;
    } else {
      const uint8_t b = codes[byte];
      dst[j] = d * static_cast<float>((high ? b >> 4 : b & 0x0F) - 8);
      j += 1;
    }
  }
}

// 8 E4M3 bytes -> 8 floats times 2^-8 (S.EEEE.MMM -> FP16 S.0EEEE.MMM0000000).
inline __m256 load8_fp8(const uint8_t* p) {
  const __m128i b = _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
  const __m128i sign = _mm_slli_epi16(_mm_and_si128(b, _mm_set1_epi16(0x80)), 8);
  const __m128i mag = _mm_slli_epi16(_mm_and_si128(b, _mm_set1_epi16(0x7F)), 7);
  return _mm256_cvtph_ps(_mm_or_si128(sign, mag));
}

template <Mode kMode>
inline float decode1(uint8_t b) {
  if constexpr (kMode == Mode::kFp8) {
    return _cvtsh_ss(static_cast<unsigned short>(((b & 0x80) << 8) | ((b & 0x7F) << 7))) * 256.0f;
  } else {
    return static_cast<float>(static_cast<int8_t>(b));
  }
}

// dst[0..len) = d times the one-byte codes (Q8_0, FP8) at `codes`.
template <Mode kMode>
void dequant_bytes(const uint8_t* codes, int64_t len, float d, float* dst) {
  int64_t j = 0;
  if constexpr (kMode == Mode::kFp8) {
    const __m256 s = _mm256_set1_ps(d * 256.0f);
    for (; j + 8 <= len; j += 8) _mm256_storeu_ps(dst + j, _mm256_mul_ps(load8_fp8(codes + j), s));
  } else {
    const __m256 s = _mm256_set1_ps(d);
    for (; j + 8 <= len; j += 8) {
      const __m256i q = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(codes + j)));
      _mm256_storeu_ps(dst + j, _mm256_mul_ps(_mm256_cvtepi32_ps(q), s));
    }
  }
  for (; j < len; ++j) dst[j] = d * decode1<kMode>(codes[j]);
}

// dst[0..n) = elements [first, first + n) of a quantized row.
template <Mode kMode>
void dequant_slice(const uint8_t* row, int64_t group, int64_t first, int64_t n, float* dst) {
  int64_t i = 0;
  while (i < n) {
    const int64_t e = first + i;
    const uint8_t* gp = row + (e / group) * group_bytes<kMode>(group);
    unsigned short dbits;
    __builtin_memcpy(&dbits, gp, 2);
    const float d = _cvtsh_ss(dbits);
    const int64_t in = e % group;
    const int64_t len = group - in < n - i ? group - in : n - i;
    if constexpr (kMode == Mode::kQ4_0) {
      dequant_q4(gp + 2, group, in, len, d, dst + i);
    } else {
      dequant_bytes<kMode>(gp + 2 + in, len, d, dst + i);
    }
    i += len;
  }
}

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

// out[g] += sum_i p[g][i] * v_i over head_dim for g < G and the n V rows
// of a chunk, in key order. Each 8-column slice of the heads' outputs stays
// in registers while the chunk's rows pass (one load and store of out per
// chunk, not per key); each V slice is loaded once for all heads. Per
// output element the FMAs are the same, in the same order, as one key at a
// time.
template <int G, bool kF16>
inline void axpy_chunk(const float (&p)[G][kChunk], const uint8_t* const* v_rows, int64_t n, int64_t head_dim,
                       float* out) {
  int64_t d = 0;
  for (; d + 8 <= head_dim; d += 8) {
    __m256 acc[G];
    for (int g = 0; g < G; ++g) acc[g] = _mm256_loadu_ps(out + g * head_dim + d);
    for (int64_t i = 0; i < n; ++i) {
      const __m256 x = load8<kF16>(v_rows[i], d);
      for (int g = 0; g < G; ++g) acc[g] = _mm256_fmadd_ps(_mm256_set1_ps(p[g][i]), x, acc[g]);
    }
    for (int g = 0; g < G; ++g) _mm256_storeu_ps(out + g * head_dim + d, acc[g]);
  }
  if (d < head_dim) {
    const __m256i m = tail_mask(head_dim - d);
    __m256 acc[G];
    for (int g = 0; g < G; ++g) acc[g] = _mm256_maskload_ps(out + g * head_dim + d, m);
    for (int64_t i = 0; i < n; ++i) {
      const __m256 x = load_tail<kF16>(v_rows[i], d, head_dim - d);
      for (int g = 0; g < G; ++g) acc[g] = _mm256_fmadd_ps(_mm256_set1_ps(p[g][i]), x, acc[g]);
    }
    for (int g = 0; g < G; ++g) _mm256_maskstore_ps(out + g * head_dim + d, m, acc[g]);
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

// Dequantizes the head's slice of n K and V rows into k_buf / v_buf
// [n, head_dim] and points the row pointers at the floats.
template <Mode kMode>
void dequant_rows(int64_t n, int64_t group, int64_t first, int64_t head_dim, float* k_buf, float* v_buf,
                  const uint8_t** k_rows, const uint8_t** v_rows) {
  for (int64_t i = 0; i < n; ++i) {
    dequant_slice<kMode>(k_rows[i], group, first, head_dim, k_buf + i * head_dim);
    dequant_slice<kMode>(v_rows[i], group, first, head_dim, v_buf + i * head_dim);
    k_rows[i] = reinterpret_cast<const uint8_t*>(k_buf + i * head_dim);
    v_rows[i] = reinterpret_cast<const uint8_t*>(v_buf + i * head_dim);
  }
}

// w[i] = exp(w[i] - m) * inv for i < n: a head's kept scores become its
// final softmax weights.
void normalize_weights(float* w, int64_t n, float m, float inv) {
  const __m256 sh = _mm256_set1_ps(m);
  const __m256 sc = _mm256_set1_ps(inv);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(w + i, _mm256_mul_ps(exp_ps(_mm256_sub_ps(_mm256_loadu_ps(w + i), sh)), sc));
  for (; i < n; ++i) w[i] = expf(w[i] - m) * inv;
}

template <int G, Mode kMode>
void attend_group(const PagedKv& kv, const int32_t* table, int64_t kv_head, const float* q, int64_t j_begin,
                  int64_t j_end, int64_t head_dim, float scale, float softcap, float* out, float* kept) {
  const int64_t len = j_end - j_begin;
  constexpr bool kQuant = kMode == Mode::kQ8_0 || kMode == Mode::kFp8 || kMode == Mode::kQ4_0;
  constexpr bool kF16 = kMode == Mode::kF16;  // how the rows the kernels read are stored
  const int64_t elem = kF16 ? 2 : 4;
  const int64_t row_bytes = kQuant ? quant_row_bytes<kMode>(kv.n_kv_dim) : kv.n_kv_dim * elem;
  const int64_t head_offset = kQuant ? 0 : kv_head * head_dim * elem;
  const int64_t group = kQuant ? quant_group(kv.n_kv_dim) : 0;
  const int64_t chunk = kQuant ? (kQuantBuffer / head_dim < kChunk ? kQuantBuffer / head_dim : kChunk) : kChunk;
  alignas(32) float k_buf[kQuant ? kQuantBuffer : 1];
  alignas(32) float v_buf[kQuant ? kQuantBuffer : 1];
  const uint8_t* k_rows[kChunk];
  const uint8_t* v_rows[kChunk];
  float scores[kChunk][G];   // [key, head]
  float weights[G][kChunk];  // [head, key]
  float m[G], l[G];
  for (int g = 0; g < G; ++g) m[g] = -INFINITY, l[g] = 0.0f;
  for (int64_t d = 0; d < G * head_dim; ++d) out[d] = 0.0f;
  for (int64_t j0 = j_begin; j0 < j_end; j0 += chunk) {
    const int64_t n = j_end - j0 < chunk ? j_end - j0 : chunk;
    paged_chunk_rows(kv, table, j0, n, row_bytes, head_offset, k_rows, v_rows);
    if constexpr (kQuant) dequant_rows<kMode>(n, group, kv_head * head_dim, head_dim, k_buf, v_buf, k_rows, v_rows);
    for (int64_t i = 0; i < n; ++i) dot_group<G, kF16>(q, head_dim, k_rows[i], scores[i]);
    for (int g = 0; g < G; ++g) {
      float chunk_max = -INFINITY;
      for (int64_t i = 0; i < n; ++i) {
        float s = scores[i][g] * scale;
        if (softcap > 0.0f) s = softcap * tanhf(s / softcap);
        weights[g][i] = s;
        chunk_max = s > chunk_max ? s : chunk_max;
      }
      if (kept != nullptr) __builtin_memcpy(kept + g * len + (j0 - j_begin), weights[g], sizeof(float) * n);
      if (chunk_max > m[g]) {                       // rescale the previous chunks' state to the new max
        const float keep = expf(m[g] - chunk_max);  // 0 for the first chunk (m = -inf)
        l[g] *= keep;
        // GCC (C++: -ffp-contract=fast) may fuse this product with the sum
        // added below into one FMA, depending on inlining that differs
        // with G; the barrier keeps both roundings, so a head's result does
        // not depend on how its group is split.
        __asm__("" : "+x"(l[g]));
        scale_inplace(out + g * head_dim, keep, head_dim);
        m[g] = chunk_max;
      }
      l[g] += exp_shift_sum(weights[g], n, m[g]);
    }
    axpy_chunk<G, kF16>(weights, v_rows, n, head_dim, out);
  }
  for (int g = 0; g < G; ++g) {
    const float inv = l[g] > 0.0f ? 1.0f / l[g] : 0.0f;
    scale_inplace(out + g * head_dim, inv, head_dim);
    if (kept != nullptr) normalize_weights(kept + g * len, len, m[g], inv);
  }
}

using GroupKernel = void (*)(const PagedKv&, const int32_t*, int64_t, const float*, int64_t, int64_t, int64_t, float,
                             float, float*, float*);

template <Mode kMode>
GroupKernel pick(int64_t num_heads) {
  switch (num_heads) {
    case 1: return attend_group<1, kMode>;
    case 2: return attend_group<2, kMode>;
    case 3: return attend_group<3, kMode>;
    case 4: return attend_group<4, kMode>;
    case 5: return attend_group<5, kMode>;
    case 6: return attend_group<6, kMode>;
    case 7: return attend_group<7, kMode>;
    case 8: return attend_group<8, kMode>;
    default: return nullptr;
  }
}

}  // namespace

void paged_attend_group(const PagedKv& kv, const int32_t* block_table, int64_t kv_head, const float* q,
                        int64_t num_heads, int64_t j_begin, int64_t j_end, int64_t head_dim, float scale, float softcap,
                        float* out, float* weights) {
  static_assert(kMaxPagedGroup == 8, "pick() covers 1..8 heads");
  GroupKernel kernel = nullptr;
  switch (kv.dtype) {
    case kv::KvDtype::F32: kernel = pick<Mode::kF32>(num_heads); break;
    case kv::KvDtype::F16: kernel = pick<Mode::kF16>(num_heads); break;
    case kv::KvDtype::Q8_0: kernel = pick<Mode::kQ8_0>(num_heads); break;
    case kv::KvDtype::FP8_E4M3: kernel = pick<Mode::kFp8>(num_heads); break;
    case kv::KvDtype::Q4_0:
    case kv::KvDtype::Q4_0_KC: kernel = pick<Mode::kQ4_0>(num_heads); break;  // the same bytes
  }
  if (kernel == nullptr) __builtin_trap();  // the driver never passes more than kMaxPagedGroup heads
  kernel(kv, block_table, kv_head, q, j_begin, j_end, head_dim, scale, softcap, out, weights);
}

}  // namespace tokenmill::kernels::avx2
