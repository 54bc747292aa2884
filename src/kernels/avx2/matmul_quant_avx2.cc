// AVX2 decoders for the GGUF block types of the models we run (Q8_0, Q4_0,
// Q5_0, Q4_K, Q6_K), used twice: to dequantize rows fast for the panel path,
// and fused with the dot products for decode, so a weight row is read once
// and never stored as floats. Each decoder turns 32 consecutive elements of
// a block into 4 vectors of 8 floats, with the same arithmetic as the
// scalar reference (so dequantization matches it exactly).
//
// The integer path has its own decoders for these types
// (vec_dot_legacy_avx2.cc, vec_dot_k_avx2.cc; pack_q4_0_avx2.cc for Q4_0
// panels; gemm_interleaved_avx2.cc for the copies reordered at load, whose
// bytes are in another order). They are not the same work: those widen the
// stored integers to int16 and keep scales, offsets and minimums apart
// (scales multiply each block's integer sum, offsets and minimums go through
// the activation sums), while these apply them per element to give the
// reference's floats, which the int16 form cannot give back without a second
// widening, conversion and multiply per element. On AVX2 and AVX-512 matmul
// takes the integer path for all five types (choose_path in matmul.cc), so it
// reaches these for them only through a table with the integer path taken out
// (kernels_bench's FP32 paths); the tests compare them with the reference
// through the AVX2 table's rows (dequantize_row, fused_rows).
//
// Block layouts (GGUF; d and dmin are fp16, all little-endian):
//   Q8_0 (34 B / 32):  d, int8 q[32];              x = d * q
//   Q4_0 (18 B / 32):  d, uint8 qs[16];            x[j] = d * ((qs[j] & 15) - 8), x[j+16] = d * ((qs[j] >> 4) - 8)
//   Q5_0 (22 B / 32):  d, uint32 qh, uint8 qs[16]; as Q4_0 with bit j of qh as the 5th bit of x[j], minus 16
//   Q4_K (144 B / 256): d, dmin, uint8 scales[12] (8 packed 6-bit scale/min pairs), uint8 qs[128];
//                      sub-block s of 32: x = d*sc[s] * q - dmin*m[s], q = nibbles of qs[32*(s/2)..]
//                      (low nibbles for even s, high for odd)
//   Q6_K (210 B / 256): uint8 ql[128], uint8 qh[64], int8 scales[16], d; 6-bit q - 32, scale per 16
#include <immintrin.h>
#include <string.h>

#include "kernels/avx2/avx2.h"
#include "kernels/avx2/math_avx2.h"
#include "kernels/decoder_for.h"

namespace tokenmill::kernels::avx2 {
namespace {

using gguf::TensorType;

inline float load_fp16(const uint8_t* p) {
  uint16_t h;
  memcpy(&h, p, 2);
  return _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(h)));
}

// 32 signed / unsigned bytes -> 4 x 8 floats, in element order.
inline void i8_to_ps(__m256i v, __m256 out[4]) {
  const __m128i lo = _mm256_castsi256_si128(v);
  const __m128i hi = _mm256_extracti128_si256(v, 1);
  out[0] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(lo));
  out[1] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(lo, 8)));
  out[2] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(hi));
  out[3] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(hi, 8)));
}

inline void u8_to_ps(__m256i v, __m256 out[4]) {
  const __m128i lo = _mm256_castsi256_si128(v);
  const __m128i hi = _mm256_extracti128_si256(v, 1);
  out[0] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(lo));
  out[1] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(lo, 8)));
  out[2] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(hi));
  out[3] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(hi, 8)));
}

inline void scale4(__m256 w[4], float s) {
  const __m256 sv = _mm256_set1_ps(s);
  for (int g = 0; g < 4; ++g) w[g] = _mm256_mul_ps(sv, w[g]);
}

// The 16 bytes of qs as 32 nibbles in element order: low nibbles (elements
// 0..15) in the low lane, high nibbles (16..31) in the high lane.
inline __m256i split_nibbles_16(const uint8_t* qs) {
  const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m128i mask = _mm_set1_epi8(15);
  const __m128i lo = _mm_and_si128(q, mask);
  const __m128i hi = _mm_and_si128(_mm_srli_epi16(q, 4), mask);
  return _mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1);
}

struct Q8_0 {
  static constexpr TensorType kType = TensorType::Q8_0;
  static constexpr int64_t kBlock = 32, kBytes = 34;
  static void decode(const uint8_t* b, int, __m256 w[4]) {
    i8_to_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 2)), w);
    scale4(w, load_fp16(b));
  }
};

struct Q4_0 {
  static constexpr TensorType kType = TensorType::Q4_0;
  static constexpr int64_t kBlock = 32, kBytes = 18;
  static void decode(const uint8_t* b, int, __m256 w[4]) {
    i8_to_ps(_mm256_sub_epi8(split_nibbles_16(b + 2), _mm256_set1_epi8(8)), w);
    scale4(w, load_fp16(b));
  }
};

struct Q5_0 {
  static constexpr TensorType kType = TensorType::Q5_0;
  static constexpr int64_t kBlock = 32, kBytes = 22;
  // Byte j of the result is 16 if bit j of qh is set, else 0.
  static __m256i high_bits(const uint8_t* qh_ptr) {
    uint32_t qh;
    memcpy(&qh, qh_ptr, 4);
    const __m256i spread = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(qh)),
                                               _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2,
                                                                2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
    const __m256i bit = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ULL));
    const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
    return _mm256_and_si256(set, _mm256_set1_epi8(16));
  }
  static void decode(const uint8_t* b, int, __m256 w[4]) {
    const __m256i q = _mm256_or_si256(split_nibbles_16(b + 6), high_bits(b + 2));
    i8_to_ps(_mm256_sub_epi8(q, _mm256_set1_epi8(16)), w);
    scale4(w, load_fp16(b));
  }
};

struct Q4_K {
  static constexpr TensorType kType = TensorType::Q4_K;
  static constexpr int64_t kBlock = 256, kBytes = 144;
  // Unpacks the 6-bit scale and min of sub-block s from the 12 scale bytes.
  static void scale_min(const uint8_t* q, int s, int& sc, int& m) {
    if (s < 4) {
      sc = q[s] & 63;
      m = q[s + 4] & 63;
    } else {
      sc = (q[s + 4] & 15) | ((q[s - 4] >> 6) << 4);
      m = (q[s + 4] >> 4) | ((q[s] >> 6) << 4);
    }
  }
  static void decode(const uint8_t* b, int s, __m256 w[4]) {
    int sc = 0, m = 0;
    scale_min(b + 4, s, sc, m);
    const __m256 d = _mm256_set1_ps(load_fp16(b) * static_cast<float>(sc));
    const __m256 mn = _mm256_set1_ps(load_fp16(b + 2) * static_cast<float>(m));
    __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 16 + 32 * (s / 2)));
    if (s & 1) q = _mm256_srli_epi16(q, 4);
    u8_to_ps(_mm256_and_si256(q, _mm256_set1_epi8(15)), w);
    for (int g = 0; g < 4; ++g) w[g] = _mm256_sub_ps(_mm256_mul_ps(d, w[g]), mn);
  }
};

struct Q6_K {
  static constexpr TensorType kType = TensorType::Q6_K;
  static constexpr int64_t kBlock = 256, kBytes = 210;
  // Chunk s of 32 = half h (128 elements), quarter k: low 4 bits from
  // ql[64h + 32(k&1)..] (high nibble when k >= 2), top 2 bits at bit 2k of
  // qh[32h..]; scales 8h + 2k (first 16 elements) and 8h + 2k + 1.
  static void decode(const uint8_t* b, int s, __m256 w[4]) {
    const int h = s / 4;
    const int k = s % 4;
    __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 64 * h + 32 * (k & 1)));
    if (k >= 2) lo = _mm256_srli_epi16(lo, 4);
    lo = _mm256_and_si256(lo, _mm256_set1_epi8(15));
    __m256i hi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 128 + 32 * h));
    hi = _mm256_and_si256(_mm256_srl_epi16(hi, _mm_cvtsi32_si128(2 * k)), _mm256_set1_epi8(3));
    const __m256i q = _mm256_sub_epi8(_mm256_or_si256(lo, _mm256_slli_epi16(hi, 4)), _mm256_set1_epi8(32));
    i8_to_ps(q, w);
    const auto* scales = reinterpret_cast<const int8_t*>(b + 192) + 8 * h + 2 * k;
    const float d = load_fp16(b + 208);
    const __m256 s0 = _mm256_set1_ps(d * static_cast<float>(scales[0]));
    const __m256 s1 = _mm256_set1_ps(d * static_cast<float>(scales[1]));
    w[0] = _mm256_mul_ps(s0, w[0]);
    w[1] = _mm256_mul_ps(s0, w[1]);
    w[2] = _mm256_mul_ps(s1, w[2]);
    w[3] = _mm256_mul_ps(s1, w[3]);
  }
};

template <class D>
void dequantize_blocks(const void* src_bytes, float* dst, int64_t n) {
  const auto* src = static_cast<const uint8_t*>(src_bytes);
  for (int64_t b = 0; b < n / D::kBlock; ++b) {
    for (int s = 0; s < D::kBlock / 32; ++s) {
      __m256 w[4];
      D::decode(src + b * D::kBytes, s, w);
      float* out = dst + b * D::kBlock + 32 * s;
      for (int g = 0; g < 4; ++g) _mm256_storeu_ps(out + 8 * g, w[g]);
    }
  }
}

// y[t * ys] = row . x[t] for T <= 4 tokens; weights decoded once per 32 and
// used for every token. A accumulators per token hide FMA latency.
template <class D, int T>
void quant_row(const uint8_t* row, int64_t cols, const float* x, int64_t xs, float* y, int64_t ys) {
  constexpr int A = T <= 2 ? 4 : 2;
  __m256 acc[T][A];
  for (int t = 0; t < T; ++t) {
    for (int a = 0; a < A; ++a) acc[t][a] = _mm256_setzero_ps();
  }
  for (int64_t b = 0; b < cols / D::kBlock; ++b) {
    for (int s = 0; s < D::kBlock / 32; ++s) {
      __m256 w[4];
      D::decode(row + b * D::kBytes, s, w);
      const float* xc = x + b * D::kBlock + 32 * s;
#pragma GCC unroll 4
      for (int g = 0; g < 4; ++g) {
#pragma GCC unroll 4
        for (int t = 0; t < T; ++t) {
          acc[t][g % A] = _mm256_fmadd_ps(w[g], _mm256_loadu_ps(xc + t * xs + 8 * g), acc[t][g % A]);
        }
      }
    }
  }
  for (int t = 0; t < T; ++t) {
    __m256 sum = acc[t][0];
    for (int a = 1; a < A; ++a) sum = _mm256_add_ps(sum, acc[t][a]);
    y[t * ys] = hsum(sum);
  }
}

template <class D, int T>
void quant_rows(const WeightView& w, int64_t r0, int64_t r1, const float* x, float* y) {
  const auto* base = static_cast<const uint8_t*>(w.data);
  const int64_t row_bytes = w.cols / D::kBlock * D::kBytes;
  for (int64_t r = r0; r < r1; ++r) quant_row<D, T>(base + r * row_bytes, w.cols, x, w.cols, y + r, w.rows);
}

template <class D>
void quant_rows_any(const WeightView& w, int64_t r0, int64_t r1, const float* x, int64_t num_tokens, float* y) {
  switch (num_tokens) {
    case 1: return quant_rows<D, 1>(w, r0, r1, x, y);
    case 2: return quant_rows<D, 2>(w, r0, r1, x, y);
    case 3: return quant_rows<D, 3>(w, r0, r1, x, y);
    default: return quant_rows<D, 4>(w, r0, r1, x, y);
  }
}

}  // namespace

template <TensorType T>
constinit const TypeKernels::DequantizeRow BlockFloatKernels<T>::dequantize_row =
    dequantize_blocks<DecoderFor<T, Q8_0, Q4_0, Q5_0, Q4_K, Q6_K>>;
template <TensorType T>
constinit const TypeKernels::FusedRows BlockFloatKernels<T>::fused_rows =
    quant_rows_any<DecoderFor<T, Q8_0, Q4_0, Q5_0, Q4_K, Q6_K>>;

template struct BlockFloatKernels<TensorType::Q8_0>;
template struct BlockFloatKernels<TensorType::Q4_0>;
template struct BlockFloatKernels<TensorType::Q5_0>;
template struct BlockFloatKernels<TensorType::Q4_K>;
template struct BlockFloatKernels<TensorType::Q6_K>;

}  // namespace tokenmill::kernels::avx2
