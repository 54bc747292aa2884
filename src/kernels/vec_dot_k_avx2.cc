// Integer decode-path decoders for the K-quant super-blocks (Q2_K, Q3_K,
// Q4_K, Q5_K, Q6_K; 256 elements each, layouts in quant_blocks.h), for the
// row kernel in vec_dot_avx2.h. prepare() unpacks a super-block's packed
// sub-block scales once; decode() widens one chunk of 32 weights to int16.
// Types with one scale per 16 elements (Q2_K, Q3_K, Q6_K) fold that integer
// scale into the int16 weights (mullo), so their float factor is the
// super-block's d; Q4_K and Q5_K (one scale per 32) keep d * sc as the float
// factor. Minimums (Q2_K, Q4_K, Q5_K) go through the activation sums.
#include "kernels/vec_dot.h"
#include "kernels/vec_dot_avx2.h"

namespace tokenmill::kernels::avx2 {
namespace {

using gguf::TensorType;

// Q4_K / Q5_K: the eight 6-bit scales and minimums packed in 12 bytes
// (quant_blocks.h), as floats d * sc[k] and -dmin * m[k].
inline void unpack_scales_mins_6bit(const uint8_t* q, float d, float dmin, float* sc, float* mn) {
  uint32_t a, b, c;
  memcpy(&a, q, 4);
  memcpy(&b, q + 4, 4);
  memcpy(&c, q + 8, 4);
  const uint64_t sc_bytes = (a & 0x3f3f3f3fu) |
                            static_cast<uint64_t>((c & 0x0f0f0f0fu) | (((a >> 6) & 0x03030303u) << 4)) << 32;
  const uint64_t m_bytes = (b & 0x3f3f3f3fu) |
                           static_cast<uint64_t>(((c >> 4) & 0x0f0f0f0fu) | (((b >> 6) & 0x03030303u) << 4)) << 32;
  const __m256 s = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128(static_cast<int64_t>(sc_bytes))));
  const __m256 m = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128(static_cast<int64_t>(m_bytes))));
  _mm256_storeu_ps(sc, _mm256_mul_ps(s, _mm256_set1_ps(d)));
  _mm256_storeu_ps(mn, _mm256_mul_ps(m, _mm256_set1_ps(-dmin)));
}

// Elements 0..15 and 16..31 of 32 nibbles at p (low nibbles, or high when
// `high`), as unsigned bytes.
inline void nibbles32(const uint8_t* p, bool high, __m128i& lo, __m128i& hi) {
  __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16));
  if (high) {
    a = _mm_srli_epi16(a, 4);
    b = _mm_srli_epi16(b, 4);
  }
  const __m128i mask = _mm_set1_epi8(15);
  lo = _mm_and_si128(a, mask);
  hi = _mm_and_si128(b, mask);
}

// 32 two-bit fields at bit `shift` of the bytes at p, as bytes 0..3.
inline void crumbs32(const uint8_t* p, int shift, __m128i& lo, __m128i& hi) {
  const __m128i sh = _mm_cvtsi32_si128(shift);
  const __m128i mask = _mm_set1_epi8(3);
  lo = _mm_and_si128(_mm_srl_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)), sh), mask);
  hi = _mm_and_si128(_mm_srl_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16)), sh), mask);
}

// Bytes (bit `bit` of each of the 32 bytes at p) ? value : 0.
inline void bit_bytes32(const uint8_t* p, int bit, char value, __m128i& lo, __m128i& hi) {
  const __m128i m = _mm_set1_epi8(static_cast<char>(1 << bit));
  const __m128i v = _mm_set1_epi8(value);
  lo = _mm_and_si128(_mm_cmpeq_epi8(_mm_and_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)), m), m), v);
  hi = _mm_and_si128(_mm_cmpeq_epi8(_mm_and_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16)), m), m), v);
}

// Signed bytes times a per-16 integer scale, widened: int16 lanes.
inline void widen_scaled(__m128i lo, __m128i hi, int16_t s0, int16_t s1, __m256i& w0, __m256i& w1) {
  w0 = _mm256_mullo_epi16(_mm256_cvtepi8_epi16(lo), _mm256_set1_epi16(s0));
  w1 = _mm256_mullo_epi16(_mm256_cvtepi8_epi16(hi), _mm256_set1_epi16(s1));
}

struct Q4_K {
  static constexpr int64_t kBlock = 256, kBytes = 144;
  static constexpr int kBias = 32;
  struct Ctx { float sc[8], mn[8]; };
  static void prepare(const uint8_t* b, Ctx& c) {
    unpack_scales_mins_6bit(b + 4, fp16_to_f32(b), fp16_to_f32(b + 2), c.sc, c.mn);
  }
  static void decode(const uint8_t* b, const Ctx&, int s, __m256i& w0, __m256i& w1) {
    __m128i lo, hi;
    nibbles32(b + 16 + 32 * (s / 2), (s & 1) != 0, lo, hi);
    w0 = _mm256_cvtepu8_epi16(lo);
    w1 = _mm256_cvtepu8_epi16(hi);
  }
  static float scale(const Ctx& c, int s) { return c.sc[s]; }
  static float bias(const Ctx& c, int s) { return c.mn[s]; }
};

struct Q5_K {
  static constexpr int64_t kBlock = 256, kBytes = 176;
  static constexpr int kBias = 32;
  struct Ctx { float sc[8], mn[8]; };
  static void prepare(const uint8_t* b, Ctx& c) {
    unpack_scales_mins_6bit(b + 4, fp16_to_f32(b), fp16_to_f32(b + 2), c.sc, c.mn);
  }
  static void decode(const uint8_t* b, const Ctx&, int s, __m256i& w0, __m256i& w1) {
    __m128i lo, hi, hlo, hhi;
    nibbles32(b + 48 + 32 * (s / 2), (s & 1) != 0, lo, hi);
    bit_bytes32(b + 16, s, 16, hlo, hhi);
    w0 = _mm256_cvtepu8_epi16(_mm_or_si128(lo, hlo));
    w1 = _mm256_cvtepu8_epi16(_mm_or_si128(hi, hhi));
  }
  static float scale(const Ctx& c, int s) { return c.sc[s]; }
  static float bias(const Ctx& c, int s) { return c.mn[s]; }
};

struct Q6_K {
  static constexpr int64_t kBlock = 256, kBytes = 210;
  static constexpr int kBias = 0;
  struct Ctx { float d; };
  static void prepare(const uint8_t* b, Ctx& c) { c.d = fp16_to_f32(b + 208); }
  // Chunk s: half h = s / 4, quarter k = s % 4 (see quant_blocks.h).
  static void decode(const uint8_t* b, const Ctx&, int s, __m256i& w0, __m256i& w1) {
    const int h = s / 4, k = s % 4;
    __m128i lo, hi, qlo, qhi;
    nibbles32(b + 64 * h + 32 * (k & 1), k >= 2, lo, hi);
    crumbs32(b + 128 + 32 * h, 2 * k, qlo, qhi);
    const __m128i off = _mm_set1_epi8(32);
    lo = _mm_sub_epi8(_mm_or_si128(lo, _mm_slli_epi16(qlo, 4)), off);
    hi = _mm_sub_epi8(_mm_or_si128(hi, _mm_slli_epi16(qhi, 4)), off);
    const auto* scales = reinterpret_cast<const int8_t*>(b + 192);
    widen_scaled(lo, hi, scales[2 * s], scales[2 * s + 1], w0, w1);
  }
  static float scale(const Ctx& c, int) { return c.d; }
  static float bias(const Ctx&, int) { return 0.0f; }
};

struct Q3_K {
  static constexpr int64_t kBlock = 256, kBytes = 110;
  static constexpr int kBias = 0;
  struct Ctx { float d; int16_t sc[16]; };
  static void prepare(const uint8_t* b, Ctx& c) {
    c.d = fp16_to_f32(b + 108);
    const uint8_t* s = b + 96;
    for (int k = 0; k < 16; ++k) {
      const int low = k < 8 ? s[k] & 15 : s[k - 8] >> 4;
      const int high = (s[8 + k % 4] >> (2 * (k / 4))) & 3;
      c.sc[k] = static_cast<int16_t>((low | high << 4) - 32);
    }
  }
  // Chunk s: 2-bit fields at shift 2 * (s % 4) of qs[32 * (s / 4)..], high
  // bit s of hmask; value (low | high << 2) - 4.
  static void decode(const uint8_t* b, const Ctx& c, int s, __m256i& w0, __m256i& w1) {
    __m128i lo, hi, hlo, hhi;
    crumbs32(b + 32 + 32 * (s / 4), 2 * (s % 4), lo, hi);
    bit_bytes32(b, s, 4, hlo, hhi);
    const __m128i four = _mm_set1_epi8(4);
    lo = _mm_sub_epi8(_mm_or_si128(lo, hlo), four);
    hi = _mm_sub_epi8(_mm_or_si128(hi, hhi), four);
    widen_scaled(lo, hi, c.sc[2 * s], c.sc[2 * s + 1], w0, w1);
  }
  static float scale(const Ctx& c, int) { return c.d; }
  static float bias(const Ctx&, int) { return 0.0f; }
};

struct Q2_K {
  static constexpr int64_t kBlock = 256, kBytes = 84;
  static constexpr int kBias = 16;
  struct Ctx { float d; float mn[16]; };
  static void prepare(const uint8_t* b, Ctx& c) {
    c.d = fp16_to_f32(b + 80);
    const float dmin = fp16_to_f32(b + 82);
    for (int k = 0; k < 16; ++k) c.mn[k] = -dmin * static_cast<float>(b[k] >> 4);
  }
  static void decode(const uint8_t* b, const Ctx&, int s, __m256i& w0, __m256i& w1) {
    __m128i lo, hi;
    crumbs32(b + 16 + 32 * (s / 4), 2 * (s % 4), lo, hi);
    widen_scaled(lo, hi, b[2 * s] & 15, b[2 * s + 1] & 15, w0, w1);
  }
  static float scale(const Ctx& c, int) { return c.d; }
  static float bias(const Ctx& c, int k) { return c.mn[k]; }
};

}  // namespace

bool q16_supports_k(TensorType type) {
  switch (type) {
    case TensorType::Q2_K:
    case TensorType::Q3_K:
    case TensorType::Q4_K:
    case TensorType::Q5_K:
    case TensorType::Q6_K:
      return true;
    default:
      return false;
  }
}

void q16_rows_k(const WeightView& w, int64_t row_begin, int64_t row_end, const QuantizedActs& a,
                int64_t num_tokens, float* y) {
  const auto* data = static_cast<const uint8_t*>(w.data);
  switch (w.type) {
    case TensorType::Q2_K: return q16_rows<Q2_K>(data, w.rows, w.cols, row_begin, row_end, a, num_tokens, y);
    case TensorType::Q3_K: return q16_rows<Q3_K>(data, w.rows, w.cols, row_begin, row_end, a, num_tokens, y);
    case TensorType::Q4_K: return q16_rows<Q4_K>(data, w.rows, w.cols, row_begin, row_end, a, num_tokens, y);
    case TensorType::Q5_K: return q16_rows<Q5_K>(data, w.rows, w.cols, row_begin, row_end, a, num_tokens, y);
    case TensorType::Q6_K: return q16_rows<Q6_K>(data, w.rows, w.cols, row_begin, row_end, a, num_tokens, y);
    default: return;
  }
}

}  // namespace tokenmill::kernels::avx2
