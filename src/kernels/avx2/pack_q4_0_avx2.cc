// Q4_0 rows decoded and packed for the int16 GEMM in one pass
// (TypeKernels::pack_q16_blocks): the same panel bytes, scales and biases as
// q16_decode_row followed by pack_q16_rows, without the int16 row buffer in
// between. Packing is paid on every call of the packed GEMM, so it weighs
// most in batched decode: at 16 tokens (TinyLlama Q4_0, 16 sequences) the
// two-step decode + pack took a third of the time, as much as the
// micro-kernel's multiplications took two thirds.
//
// Per block of 32 columns and 8 rows: the 16 nibble bytes of each row are
// loaded, and an 8 x 8 transpose of 16-bit words gathers word j (bytes 2j,
// 2j + 1: columns 2j, 2j + 1 in the low nibbles, 2j + 16, 2j + 17 in the
// high ones) of all 8 rows into one vector. Widened to int16, that vector
// holds exactly the panel's interleaved column pair (row i, column 2j + e
// at lane 2i + e): masked, it is pair j; shifted right by 4, pair j + 8.
#include <immintrin.h>
#include <string.h>

#include "kernels/avx2/avx2.h"
#include "kernels/gemm.h"

namespace tokenmill::kernels::avx2 {
namespace {

constexpr int64_t kQ4_0Bytes = 18;  // fp16 scale + 16 bytes of nibbles

// r[i] (8 words each) becomes word i of every input row: out[j].word[i] = in[i].word[j].
inline void transpose8_epi16(__m128i r[8]) {
  const __m128i a0 = _mm_unpacklo_epi16(r[0], r[1]), a1 = _mm_unpackhi_epi16(r[0], r[1]);
  const __m128i a2 = _mm_unpacklo_epi16(r[2], r[3]), a3 = _mm_unpackhi_epi16(r[2], r[3]);
  const __m128i a4 = _mm_unpacklo_epi16(r[4], r[5]), a5 = _mm_unpackhi_epi16(r[4], r[5]);
  const __m128i a6 = _mm_unpacklo_epi16(r[6], r[7]), a7 = _mm_unpackhi_epi16(r[6], r[7]);
  const __m128i b0 = _mm_unpacklo_epi32(a0, a2), b1 = _mm_unpackhi_epi32(a0, a2);
  const __m128i b2 = _mm_unpacklo_epi32(a1, a3), b3 = _mm_unpackhi_epi32(a1, a3);
  const __m128i b4 = _mm_unpacklo_epi32(a4, a6), b5 = _mm_unpackhi_epi32(a4, a6);
  const __m128i b6 = _mm_unpacklo_epi32(a5, a7), b7 = _mm_unpackhi_epi32(a5, a7);
  r[0] = _mm_unpacklo_epi64(b0, b4);
  r[1] = _mm_unpackhi_epi64(b0, b4);
  r[2] = _mm_unpacklo_epi64(b1, b5);
  r[3] = _mm_unpackhi_epi64(b1, b5);
  r[4] = _mm_unpacklo_epi64(b2, b6);
  r[5] = _mm_unpackhi_epi64(b2, b6);
  r[6] = _mm_unpacklo_epi64(b3, b7);
  r[7] = _mm_unpackhi_epi64(b3, b7);
}

inline uint16_t load_u16(const uint8_t* p) {
  uint16_t v;
  memcpy(&v, p, 2);
  return v;
}

void pack_q4_0(const uint8_t* rows, int64_t row_bytes, int64_t num_src, int64_t cols, int64_t row0, int64_t panel_rows,
               int16_t* packed_q, float* packed_scale, float* packed_bias) {
  const int64_t group = row0 / kPackRows;
  const int64_t lane0 = row0 % kPackRows;
  const __m256i low4 = _mm256_set1_epi16(15);
  const __m256 valid = _mm256_castsi256_ps(
      _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(num_src)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)));
  for (int64_t b = 0; b < cols / 32; ++b) {
    const int64_t k0 = 32 * b / kPackChunk * kPackChunk;
    const int64_t kn = cols - k0 < kPackChunk ? cols - k0 : kPackChunk;
    int16_t* base = packed_q + k0 * panel_rows + group * kn * kPackRows + 2 * lane0;
    const int64_t j0 = (32 * b - k0) / 2;  // the block's first column pair in its chunk
    __m128i r[8];
    alignas(16) uint16_t d16[8];
    for (int i = 0; i < 8; ++i) {
      if (i < num_src) {
        const uint8_t* bp = rows + i * row_bytes + b * kQ4_0Bytes;
        d16[i] = load_u16(bp);
        r[i] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(bp + 2));
      } else {
        d16[i] = 0;
        r[i] = _mm_setzero_si128();
      }
    }
    transpose8_epi16(r);
    for (int j = 0; j < 8; ++j) {
      const __m256i v = _mm256_cvtepu8_epi16(r[j]);
      _mm256_store_si256(reinterpret_cast<__m256i*>(base + (j0 + j) * 2 * kPackRows), _mm256_and_si256(v, low4));
      _mm256_store_si256(reinterpret_cast<__m256i*>(base + (j0 + j + 8) * 2 * kPackRows), _mm256_srli_epi16(v, 4));
    }
    // x = d * (q - 8): scale d for both halves, bias -8 d (masked to +0 for
    // the rows past num_src, as pack_q16_rows writes them).
    const __m256 d = _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(d16)));
    const __m256 bias = _mm256_and_ps(_mm256_mul_ps(d, _mm256_set1_ps(-8.0f)), valid);
    for (int64_t h = 2 * b; h < 2 * b + 2; ++h) {
      _mm256_storeu_ps(packed_scale + h * panel_rows + row0, d);
      _mm256_storeu_ps(packed_bias + h * panel_rows + row0, bias);
    }
  }
}

// Only Q4_0 has a packer straight from its blocks.
template <gguf::TensorType T>
constexpr TypeKernels::PackQ16Blocks direct_packer() {
  static_assert(T == gguf::TensorType::Q4_0, "no direct int16 packer for this type");
  return pack_q4_0;
}

}  // namespace

template <gguf::TensorType T>
constinit const TypeKernels::PackQ16Blocks PackBlocksKernels<T>::pack_q16_blocks = direct_packer<T>();

template struct PackBlocksKernels<gguf::TensorType::Q4_0>;

}  // namespace tokenmill::kernels::avx2
