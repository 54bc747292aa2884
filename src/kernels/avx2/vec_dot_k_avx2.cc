// Integer decode-path decoders for the K-quant super-blocks (Q2_K, Q3_K,
// Q4_K, Q5_K, Q6_K; 256 elements each, layouts in quant_blocks.h), for the
// row kernel in vec_dot_avx2.h. prepare() unpacks a super-block's packed
// sub-block scales once, as float vectors (8 per-32 scales, or 16 per-16
// ones for Q2_K, Q3_K, Q6_K); decode() widens one chunk of 32 weights to
// int16. Minimums (Q2_K, Q4_K, Q5_K) go through the activation sums.
#include "kernels/avx2/vec_dot_avx2.h"
#include "kernels/decoder_for.h"

namespace tokenmill::kernels::avx2 {
namespace {

using gguf::TensorType;

// Q4_K / Q5_K: d, dmin and the eight 6-bit scales and minimums packed in
// the 12 bytes after them (quant_blocks.h), as vectors of d * sc[k] and
// -dmin * m[k]. With q = the 12 bytes: sc[0..3] = q[0..3] & 63,
// m[0..3] = q[4..7] & 63, sc[4..7] = (q[8..11] & 15) | (q[0..3] >> 6) << 4,
// m[4..7] = (q[8..11] >> 4) | (q[4..7] >> 6) << 4; done on all 16 bytes at once.
inline void scales_mins_6bit(const uint8_t* b, __m256& sc, __m256& mn) {
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b));  // d, dmin, q[0..11]
  const __m128i lo_raw = _mm_shuffle_epi8(v, _mm_setr_epi8(4, 5, 6, 7, 8, 9, 10, 11, -1, -1, -1, -1, -1, -1, -1, -1));
  const __m128i c = _mm_shuffle_epi8(v, _mm_setr_epi8(12, 13, 14, 15, 12, 13, 14, 15, -1, -1, -1, -1, -1, -1, -1, -1));
  const __m128i c_nib = _mm_blend_epi16(_mm_and_si128(c, _mm_set1_epi8(15)),
                                        _mm_and_si128(_mm_srli_epi16(c, 4), _mm_set1_epi8(15)), 0x0C);
  const __m128i top = _mm_and_si128(_mm_srli_epi16(lo_raw, 2), _mm_set1_epi8(0x30));  // (q >> 6) << 4
  const __m128i lo = _mm_and_si128(lo_raw, _mm_set1_epi8(63));                        // [sc0..3, m0..3]
  const __m128i hi = _mm_or_si128(c_nib, top);                                        // [sc4..7, m4..7]
  const __m128i all = _mm_unpacklo_epi32(lo, hi);                                     // sc0..3, sc4..7, m0..3, m4..7
  const __m128 dd = _mm_cvtph_ps(v);                                                  // d, dmin
  const __m256 d = _mm256_broadcastss_ps(dd);
  const __m256 dmin = _mm256_broadcastss_ps(_mm_movehdup_ps(dd));
  sc = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(all)), d);
  mn = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(all, 8))),
                     _mm256_sub_ps(_mm256_setzero_ps(), dmin));
}

// 16 signed bytes -> two vectors of 8 floats times d.
inline void scales16(__m128i v, float d, __m256 out[2]) {
  const __m256 dv = _mm256_set1_ps(d);
  out[0] = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(v)), dv);
  out[1] = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(v, 8))), dv);
}

inline __m128i load128(const uint8_t* p) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)); }

// Elements 0..15 and 16..31 of 32 nibbles at p (low nibbles, or high when
// `high`), widened to int16 (one widening load per 16 bytes).
inline void nibbles32_16(const uint8_t* p, bool high, __m256i& lo, __m256i& hi) {
  const __m256i a = _mm256_cvtepu8_epi16(load128(p));
  const __m256i b = _mm256_cvtepu8_epi16(load128(p + 16));
  if (high) {
    lo = _mm256_srli_epi16(a, 4);
    hi = _mm256_srli_epi16(b, 4);
  } else {
    lo = _mm256_and_si256(a, _mm256_set1_epi16(15));
    hi = _mm256_and_si256(b, _mm256_set1_epi16(15));
  }
}

// As bytes: 32 nibbles at p (low or high), and 32 two-bit fields at bit
// `shift` of the bytes at p.
inline void nibbles32(const uint8_t* p, bool high, __m128i& lo, __m128i& hi) {
  __m128i a = load128(p), b = load128(p + 16);
  if (high) {
    a = _mm_srli_epi16(a, 4);
    b = _mm_srli_epi16(b, 4);
  }
  lo = _mm_and_si128(a, _mm_set1_epi8(15));
  hi = _mm_and_si128(b, _mm_set1_epi8(15));
}

inline void crumbs32(const uint8_t* p, int shift, __m128i& lo, __m128i& hi) {
  const __m128i sh = _mm_cvtsi32_si128(shift);
  lo = _mm_and_si128(_mm_srl_epi16(load128(p), sh), _mm_set1_epi8(3));
  hi = _mm_and_si128(_mm_srl_epi16(load128(p + 16), sh), _mm_set1_epi8(3));
}

// Bytes (bit `bit` of each of the 32 bytes at p) ? value : 0.
inline void bit_bytes32(const uint8_t* p, int bit, char value, __m128i& lo, __m128i& hi) {
  const __m128i m = _mm_set1_epi8(static_cast<char>(1 << bit));
  const __m128i v = _mm_set1_epi8(value);
  lo = _mm_and_si128(_mm_cmpeq_epi8(_mm_and_si128(load128(p), m), m), v);
  hi = _mm_and_si128(_mm_cmpeq_epi8(_mm_and_si128(load128(p + 16), m), m), v);
}

inline void widen_signed(__m128i lo, __m128i hi, __m256i& w0, __m256i& w1) {
  w0 = _mm256_cvtepi8_epi16(lo);
  w1 = _mm256_cvtepi8_epi16(hi);
}

// x = d * sc[s] * q - dmin * m[s], 4-bit q, sub-block s of 32.
struct Q4_K {
  static constexpr TensorType kType = TensorType::Q4_K;
  static constexpr int64_t kBlock = 256, kBytes = 144;
  static constexpr bool kHalves = false;
  static constexpr int kBias = 32;
  struct Ctx {
    __m256 scale[1], bias[1];
  };
  static void prepare(const uint8_t* b, Ctx& c) { scales_mins_6bit(b, c.scale[0], c.bias[0]); }
  static void decode(const uint8_t* b, const Ctx&, int s, __m256i& w0, __m256i& w1) {
    nibbles32_16(b + 16 + 32 * (s / 2), (s & 1) != 0, w0, w1);
  }
};

// As Q4_K with a fifth bit: element 32s + i's is bit s of qh[i].
struct Q5_K {
  static constexpr TensorType kType = TensorType::Q5_K;
  static constexpr int64_t kBlock = 256, kBytes = 176;
  static constexpr bool kHalves = false;
  static constexpr int kBias = 32;
  struct Ctx {
    __m256 scale[1], bias[1];
  };
  static void prepare(const uint8_t* b, Ctx& c) { scales_mins_6bit(b, c.scale[0], c.bias[0]); }
  static __m256i fifth(const uint8_t* qh, int s) {
    const __m256i h =
        _mm256_and_si256(_mm256_cvtepu8_epi16(load128(qh)), _mm256_set1_epi16(static_cast<int16_t>(1 << s)));
    return s <= 4 ? _mm256_sll_epi16(h, _mm_cvtsi32_si128(4 - s)) : _mm256_srl_epi16(h, _mm_cvtsi32_si128(s - 4));
  }
  static void decode(const uint8_t* b, const Ctx&, int s, __m256i& w0, __m256i& w1) {
    nibbles32_16(b + 48 + 32 * (s / 2), (s & 1) != 0, w0, w1);
    w0 = _mm256_or_si256(w0, fifth(b + 16, s));
    w1 = _mm256_or_si256(w1, fifth(b + 32, s));
  }
};

// x = d * scales[e / 16] * (q - 32), 6-bit q. Chunk s: half h = s / 4,
// quarter k = s % 4 (quant_blocks.h).
struct Q6_K {
  static constexpr TensorType kType = TensorType::Q6_K;
  static constexpr int64_t kBlock = 256, kBytes = 210;
  static constexpr bool kHalves = true;
  static constexpr int kBias = 0;
  struct Ctx {
    __m256 scale[2], bias[2];
  };
  static void prepare(const uint8_t* b, Ctx& c) { scales16(load128(b + 192), fp16_to_f32(b + 208), c.scale); }
  static void decode(const uint8_t* b, const Ctx&, int s, __m256i& w0, __m256i& w1) {
    const int h = s / 4, k = s % 4;
    __m128i lo, hi, qlo, qhi;
    nibbles32(b + 64 * h + 32 * (k & 1), k >= 2, lo, hi);
    crumbs32(b + 128 + 32 * h, 2 * k, qlo, qhi);
    const __m128i off = _mm_set1_epi8(32);
    widen_signed(_mm_sub_epi8(_mm_or_si128(lo, _mm_slli_epi16(qlo, 4)), off),
                 _mm_sub_epi8(_mm_or_si128(hi, _mm_slli_epi16(qhi, 4)), off), w0, w1);
  }
};

// x = d * (sc - 32) * ((low | high << 2) - 4), sc 6-bit per 16 elements.
struct Q3_K {
  static constexpr TensorType kType = TensorType::Q3_K;
  static constexpr int64_t kBlock = 256, kBytes = 110;
  static constexpr bool kHalves = true;
  static constexpr int kBias = 0;
  struct Ctx {
    __m256 scale[2], bias[2];
  };
  // Scale k: low 4 bits from scales[k] (k < 8) or scales[k - 8] >> 4, high 2
  // bits from scales[8 + k % 4] >> 2 (k / 4): all 16 at once.
  static void prepare(const uint8_t* b, Ctx& c) {
    const uint8_t* sp = b + 96;
    uint64_t low8;
    uint32_t high4;
    memcpy(&low8, sp, 8);
    memcpy(&high4, sp + 8, 4);
    const __m128i l = _mm_cvtsi64_si128(static_cast<int64_t>(low8));
    const __m128i mask4 = _mm_set1_epi8(15);
    const __m128i low = _mm_unpacklo_epi64(_mm_and_si128(l, mask4), _mm_and_si128(_mm_srli_epi16(l, 4), mask4));
    const __m128i high = _mm_and_si128(
        _mm_srlv_epi32(_mm_set1_epi32(static_cast<int>(high4)), _mm_setr_epi32(0, 2, 4, 6)), _mm_set1_epi8(3));
    const __m128i sc = _mm_sub_epi8(_mm_or_si128(low, _mm_slli_epi16(high, 4)), _mm_set1_epi8(32));
    scales16(sc, fp16_to_f32(b + 108), c.scale);
  }
  // Chunk s: 2-bit fields at shift 2 * (s % 4) of qs[32 * (s / 4)..], high
  // bit s of hmask.
  static void decode(const uint8_t* b, const Ctx&, int s, __m256i& w0, __m256i& w1) {
    __m128i lo, hi, hlo, hhi;
    crumbs32(b + 32 + 32 * (s / 4), 2 * (s % 4), lo, hi);
    bit_bytes32(b, s, 4, hlo, hhi);
    const __m128i four = _mm_set1_epi8(4);
    widen_signed(_mm_sub_epi8(_mm_or_si128(lo, hlo), four), _mm_sub_epi8(_mm_or_si128(hi, hhi), four), w0, w1);
  }
};

// x = d * (scales[k] & 15) * q - dmin * (scales[k] >> 4), 2-bit q, per 16.
struct Q2_K {
  static constexpr TensorType kType = TensorType::Q2_K;
  static constexpr int64_t kBlock = 256, kBytes = 84;
  static constexpr bool kHalves = true;
  static constexpr int kBias = 16;
  struct Ctx {
    __m256 scale[2], bias[2];
  };
  static void prepare(const uint8_t* b, Ctx& c) {
    const __m128i v = load128(b);
    const __m128i mask4 = _mm_set1_epi8(15);
    scales16(_mm_and_si128(v, mask4), fp16_to_f32(b + 80), c.scale);
    scales16(_mm_and_si128(_mm_srli_epi16(v, 4), mask4), -fp16_to_f32(b + 82), c.bias);
  }
  static void decode(const uint8_t* b, const Ctx&, int s, __m256i& w0, __m256i& w1) {
    __m128i lo, hi;
    crumbs32(b + 16 + 32 * (s / 4), 2 * (s % 4), lo, hi);
    widen_signed(lo, hi, w0, w1);
  }
};

}  // namespace

template <TensorType T>
constinit const TypeKernels::Q16Rows Q16KQuantKernels<T>::q16_rows =
    q16_rows_of<DecoderFor<T, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K>>;
template <TensorType T>
constinit const TypeKernels::Q16DecodeRow Q16KQuantKernels<T>::q16_decode_row =
    q16_decode_row_of<DecoderFor<T, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K>>;

template struct Q16KQuantKernels<TensorType::Q2_K>;
template struct Q16KQuantKernels<TensorType::Q3_K>;
template struct Q16KQuantKernels<TensorType::Q4_K>;
template struct Q16KQuantKernels<TensorType::Q5_K>;
template struct Q16KQuantKernels<TensorType::Q6_K>;

}  // namespace tokenmill::kernels::avx2
