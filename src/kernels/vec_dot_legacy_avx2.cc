// Integer decode-path decoders for the legacy GGUF block types (Q4_0, Q4_1,
// Q5_0, Q5_1, Q8_0; layouts in quant_blocks.h) and the dispatch over all
// types. Each decoder widens one block of 32 weights to int16 for the row
// kernel in vec_dot_avx2.h. Offsets that are integers (the -8 of Q4_0, -16
// of Q5_0) are subtracted before widening; the float minimum m of Q4_1 and
// Q5_1 goes through the activation sums (kBias = 32).
#include "kernels/vec_dot.h"
#include "kernels/vec_dot_avx2.h"

namespace tokenmill::kernels::avx2 {
namespace {

using gguf::TensorType;

struct NoCtx {};

// 16 bytes of packed nibbles -> low nibbles (elements 0..15) and high
// nibbles (16..31) as bytes.
inline void nibbles(const uint8_t* qs, __m128i& lo, __m128i& hi) {
  const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m128i mask = _mm_set1_epi8(15);
  lo = _mm_and_si128(q, mask);
  hi = _mm_and_si128(_mm_srli_epi16(q, 4), mask);
}

// Byte j of the result is 16 when bit j of the little-endian uint32 at p is
// set, else 0 (the fifth bits of Q5_0 / Q5_1), split into elements 0..15
// and 16..31.
inline void fifth_bits(const uint8_t* p, __m128i& lo, __m128i& hi) {
  uint32_t qh;
  memcpy(&qh, p, 4);
  const __m128i v = _mm_cvtsi32_si128(static_cast<int>(qh));
  const __m128i bit = _mm_set1_epi64x(static_cast<int64_t>(0x8040201008040201ULL));
  const __m128i sixteen = _mm_set1_epi8(16);
  const __m128i lo_bytes = _mm_shuffle_epi8(v, _mm_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1));
  const __m128i hi_bytes = _mm_shuffle_epi8(v, _mm_setr_epi8(2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
  lo = _mm_and_si128(_mm_cmpeq_epi8(_mm_and_si128(lo_bytes, bit), bit), sixteen);
  hi = _mm_and_si128(_mm_cmpeq_epi8(_mm_and_si128(hi_bytes, bit), bit), sixteen);
}

struct Q8_0 {
  static constexpr int64_t kBlock = 32, kBytes = 34;
  static constexpr int kBias = 0;
  struct Ctx { float d; };
  static void prepare(const uint8_t* b, Ctx& c) { c.d = fp16_to_f32(b); }
  static void decode(const uint8_t* b, const Ctx&, int, __m256i& w0, __m256i& w1) {
    w0 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 2)));
    w1 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 18)));
  }
  static float scale(const Ctx& c, int) { return c.d; }
  static float bias(const Ctx&, int) { return 0.0f; }
};

struct Q4_0 {
  static constexpr int64_t kBlock = 32, kBytes = 18;
  static constexpr int kBias = 0;
  struct Ctx { float d; };
  static void prepare(const uint8_t* b, Ctx& c) { c.d = fp16_to_f32(b); }
  static void decode(const uint8_t* b, const Ctx&, int, __m256i& w0, __m256i& w1) {
    __m128i lo, hi;
    nibbles(b + 2, lo, hi);
    const __m128i eight = _mm_set1_epi8(8);
    w0 = _mm256_cvtepi8_epi16(_mm_sub_epi8(lo, eight));
    w1 = _mm256_cvtepi8_epi16(_mm_sub_epi8(hi, eight));
  }
  static float scale(const Ctx& c, int) { return c.d; }
  static float bias(const Ctx&, int) { return 0.0f; }
};

struct Q4_1 {
  static constexpr int64_t kBlock = 32, kBytes = 20;
  static constexpr int kBias = 32;
  struct Ctx { float d, m; };
  static void prepare(const uint8_t* b, Ctx& c) {
    c.d = fp16_to_f32(b);
    c.m = fp16_to_f32(b + 2);
  }
  static void decode(const uint8_t* b, const Ctx&, int, __m256i& w0, __m256i& w1) {
    __m128i lo, hi;
    nibbles(b + 4, lo, hi);
    w0 = _mm256_cvtepu8_epi16(lo);
    w1 = _mm256_cvtepu8_epi16(hi);
  }
  static float scale(const Ctx& c, int) { return c.d; }
  static float bias(const Ctx& c, int) { return c.m; }
};

struct Q5_0 {
  static constexpr int64_t kBlock = 32, kBytes = 22;
  static constexpr int kBias = 0;
  struct Ctx { float d; };
  static void prepare(const uint8_t* b, Ctx& c) { c.d = fp16_to_f32(b); }
  static void decode(const uint8_t* b, const Ctx&, int, __m256i& w0, __m256i& w1) {
    __m128i lo, hi, hlo, hhi;
    nibbles(b + 6, lo, hi);
    fifth_bits(b + 2, hlo, hhi);
    const __m128i sixteen = _mm_set1_epi8(16);
    w0 = _mm256_cvtepi8_epi16(_mm_sub_epi8(_mm_or_si128(lo, hlo), sixteen));
    w1 = _mm256_cvtepi8_epi16(_mm_sub_epi8(_mm_or_si128(hi, hhi), sixteen));
  }
  static float scale(const Ctx& c, int) { return c.d; }
  static float bias(const Ctx&, int) { return 0.0f; }
};

struct Q5_1 {
  static constexpr int64_t kBlock = 32, kBytes = 24;
  static constexpr int kBias = 32;
  struct Ctx { float d, m; };
  static void prepare(const uint8_t* b, Ctx& c) {
    c.d = fp16_to_f32(b);
    c.m = fp16_to_f32(b + 2);
  }
  static void decode(const uint8_t* b, const Ctx&, int, __m256i& w0, __m256i& w1) {
    __m128i lo, hi, hlo, hhi;
    nibbles(b + 8, lo, hi);
    fifth_bits(b + 4, hlo, hhi);
    w0 = _mm256_cvtepu8_epi16(_mm_or_si128(lo, hlo));
    w1 = _mm256_cvtepu8_epi16(_mm_or_si128(hi, hhi));
  }
  static float scale(const Ctx& c, int) { return c.d; }
  static float bias(const Ctx& c, int) { return c.m; }
};

}  // namespace

bool q16_supports(TensorType type) {
  switch (type) {
    case TensorType::Q8_0:
    case TensorType::Q4_0:
    case TensorType::Q4_1:
    case TensorType::Q5_0:
    case TensorType::Q5_1:
      return true;
    default:
      return q16_supports_k(type);
  }
}

void q16_rows(const WeightView& w, int64_t row_begin, int64_t row_end, const QuantizedActs& a,
              int64_t num_tokens, float* y) {
  const auto* data = static_cast<const uint8_t*>(w.data);
  switch (w.type) {
    case TensorType::Q8_0: return q16_rows<Q8_0>(data, w.rows, w.cols, row_begin, row_end, a, num_tokens, y);
    case TensorType::Q4_0: return q16_rows<Q4_0>(data, w.rows, w.cols, row_begin, row_end, a, num_tokens, y);
    case TensorType::Q4_1: return q16_rows<Q4_1>(data, w.rows, w.cols, row_begin, row_end, a, num_tokens, y);
    case TensorType::Q5_0: return q16_rows<Q5_0>(data, w.rows, w.cols, row_begin, row_end, a, num_tokens, y);
    case TensorType::Q5_1: return q16_rows<Q5_1>(data, w.rows, w.cols, row_begin, row_end, a, num_tokens, y);
    default: q16_rows_k(w, row_begin, row_end, a, num_tokens, y);
  }
}

}  // namespace tokenmill::kernels::avx2
