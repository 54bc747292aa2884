// Integer decode-path decoders for the legacy GGUF block types (Q4_0, Q4_1,
// Q5_0, Q5_1, Q8_0; layouts in quant_blocks.h), exported per type for the
// table (avx2.h). Each decoder widens one block of 32 weights to int16 for the row
// kernel in vec_dot_avx2.h. Offsets (the -8 of Q4_0, -16 of Q5_0) and the
// minimum m of Q4_1 / Q5_1 go through the activation sums (kBias = 32), so
// the weights are widened as stored, unsigned.
#include "kernels/avx2/vec_dot_avx2.h"
#include "kernels/decoder_for.h"

namespace tokenmill::kernels::avx2 {
namespace {

using gguf::TensorType;

// 16 bytes of packed nibbles widened to int16: low nibbles (elements
// 0..15) and high nibbles (16..31). One widening load serves both halves:
// each 16-bit lane holds one byte, so the high nibble is a plain shift.
inline void nibbles16(const uint8_t* qs, __m256i& lo, __m256i& hi) {
  const __m256i v = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs)));
  lo = _mm256_and_si256(v, _mm256_set1_epi16(15));
  hi = _mm256_srli_epi16(v, 4);
}

// Q5_0 / Q5_1: nibbles plus the fifth bits (bit j of the little-endian
// uint32 at qh is element j's), as unsigned values 0..31 in int16 lanes.
inline void five_bits(const uint8_t* qh_ptr, const uint8_t* qs, __m256i& lo, __m256i& hi) {
  uint32_t qh;
  memcpy(&qh, qh_ptr, 4);
  const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m128i mask = _mm_set1_epi8(15);
  const __m128i v = _mm_cvtsi32_si128(static_cast<int>(qh));
  const __m128i bit = _mm_set1_epi64x(static_cast<int64_t>(0x8040201008040201ULL));
  const __m128i sixteen = _mm_set1_epi8(16);
  const __m128i lo_bytes = _mm_shuffle_epi8(v, _mm_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1));
  const __m128i hi_bytes = _mm_shuffle_epi8(v, _mm_setr_epi8(2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
  const __m128i hlo = _mm_and_si128(_mm_cmpeq_epi8(_mm_and_si128(lo_bytes, bit), bit), sixteen);
  const __m128i hhi = _mm_and_si128(_mm_cmpeq_epi8(_mm_and_si128(hi_bytes, bit), bit), sixteen);
  lo = _mm256_cvtepu8_epi16(_mm_or_si128(_mm_and_si128(q, mask), hlo));
  hi = _mm256_cvtepu8_epi16(_mm_or_si128(_mm_and_si128(_mm_srli_epi16(q, 4), mask), hhi));
}

// Every decoder: the block's fp16 scale d is its first 2 bytes.
struct Q8_0 {
  static constexpr TensorType kType = TensorType::Q8_0;
  static constexpr int64_t kBlock = 32, kBytes = 34;
  static constexpr bool kHalves = false;
  static constexpr int kBias = 0;
  using Ctx = LegacyGroup;
  static void decode(const uint8_t* b, __m256i& w0, __m256i& w1) {
    w0 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 2)));
    w1 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 18)));
  }
  static __m256 bias8(const uint8_t*, __m256) { return _mm256_setzero_ps(); }
  static float bias1(const uint8_t*, float) { return 0.0f; }
};

// x = d * (q - 8): the integer products use q, the -8 d goes through s32.
struct Q4_0 {
  static constexpr TensorType kType = TensorType::Q4_0;
  static constexpr int64_t kBlock = 32, kBytes = 18;
  static constexpr bool kHalves = false;
  static constexpr int kBias = 32;
  using Ctx = LegacyGroup;
  static void decode(const uint8_t* b, __m256i& w0, __m256i& w1) { nibbles16(b + 2, w0, w1); }
  static __m256 bias8(const uint8_t*, __m256 d) { return _mm256_mul_ps(d, _mm256_set1_ps(-8.0f)); }
  static float bias1(const uint8_t*, float d) { return -8.0f * d; }
};

// x = d * q + m.
struct Q4_1 {
  static constexpr TensorType kType = TensorType::Q4_1;
  static constexpr int64_t kBlock = 32, kBytes = 20;
  static constexpr bool kHalves = false;
  static constexpr int kBias = 32;
  using Ctx = LegacyGroup;
  static void decode(const uint8_t* b, __m256i& w0, __m256i& w1) { nibbles16(b + 4, w0, w1); }
  static __m256 bias8(const uint8_t* g, __m256) { return gather_fp16_8(g + 2, kBytes); }
  static float bias1(const uint8_t* b, float) { return fp16_to_f32(b + 2); }
};

// x = d * (q - 16), q with its fifth bit.
struct Q5_0 {
  static constexpr TensorType kType = TensorType::Q5_0;
  static constexpr int64_t kBlock = 32, kBytes = 22;
  static constexpr bool kHalves = false;
  static constexpr int kBias = 32;
  using Ctx = LegacyGroup;
  static void decode(const uint8_t* b, __m256i& w0, __m256i& w1) { five_bits(b + 2, b + 6, w0, w1); }
  static __m256 bias8(const uint8_t*, __m256 d) { return _mm256_mul_ps(d, _mm256_set1_ps(-16.0f)); }
  static float bias1(const uint8_t*, float d) { return -16.0f * d; }
};

// x = d * q + m, q with its fifth bit.
struct Q5_1 {
  static constexpr TensorType kType = TensorType::Q5_1;
  static constexpr int64_t kBlock = 32, kBytes = 24;
  static constexpr bool kHalves = false;
  static constexpr int kBias = 32;
  using Ctx = LegacyGroup;
  static void decode(const uint8_t* b, __m256i& w0, __m256i& w1) { five_bits(b + 4, b + 8, w0, w1); }
  static __m256 bias8(const uint8_t* g, __m256) { return gather_fp16_8(g + 2, kBytes); }
  static float bias1(const uint8_t* b, float) { return fp16_to_f32(b + 2); }
};

}  // namespace

template <TensorType T>
constinit const TypeKernels::Q16Rows Q16LegacyKernels<T>::q16_rows =
    q16_rows_of<DecoderFor<T, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1>>;
template <TensorType T>
constinit const TypeKernels::Q16DecodeRow Q16LegacyKernels<T>::q16_decode_row =
    q16_decode_row_of<DecoderFor<T, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1>>;

template struct Q16LegacyKernels<TensorType::Q8_0>;
template struct Q16LegacyKernels<TensorType::Q4_0>;
template struct Q16LegacyKernels<TensorType::Q4_1>;
template struct Q16LegacyKernels<TensorType::Q5_0>;
template struct Q16LegacyKernels<TensorType::Q5_1>;

}  // namespace tokenmill::kernels::avx2
