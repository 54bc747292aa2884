// Activations quantized on the fly for integer dot products with quantized
// weights (the integer path of matmul; see type_kernels.h).
//
// Format: per block of kActBlock = 32 consecutive values of one token row,
// an fp32 scale d = max|x| / 32767 and int16 values q = round(x / d) in
// [-32767, 32767] (q = 0 for a block of zeros or of values below kActTiny). So x = d * q with
// |x - d q| <= d / 2 = max_block|x| / 65534 per element.
//
// Why 16-bit and not GGUF's 8-bit Q8 blocks: on Gemma 3 270M, 8-bit blocks of
// 32 put the logits at mean KL 2.0e-3 from the exact maths (blocks of 16:
// 1.1e-3), over the 1e-3 budget: its activations have large outliers. 16-bit
// blocks of 32 give 3e-8. On AVX2 the 16-bit products (madd_epi16) cost about
// what the 8-bit ones (maddubs + madd) do per weight in a memory-bound GEMV:
// both outrun what DRAM delivers (docs/benchmarks.md, kernel tuning).
//
// Layout, structure of arrays, one row per token:
//   qs   [num_tokens, cols]         int16 values
//   d    [num_tokens, cols / 32]    scales
//   s32  [num_tokens, cols / 32]    d * (sum of the block's 32 q)
//   s16  [num_tokens, cols / 16]    d * (sum of each half block's 16 q)
// The sums let weight formats with an offset or a minimum per sub-block
// (Q4_1, Q4_K, Q2_K ...) add that term once per sub-block instead of once
// per element.
#pragma once

#include <cstdint>
#include <cstdlib>

namespace tokenmill::kernels {

inline constexpr int64_t kActBlock = 32;
// Blocks whose largest |x| is at most this are stored as zeros (the
// reciprocal scale would overflow); the error, <= 1e-30 per value, is far
// below anything a float activation can carry.
inline constexpr float kActTiny = 1e-30f;

// Read-only view of quantized activations (see the layout above).
// Precondition: cols % kActBlock == 0.
struct QuantizedActs {
  const int16_t* qs = nullptr;
  const float* d = nullptr;
  const float* s32 = nullptr;
  const float* s16 = nullptr;
  int64_t cols = 0;  // values per token row
};

// Owns 64-byte aligned storage for quantized activations; grows on demand
// and keeps its capacity, so reusing one buffer allocates nothing in steady
// state. Not copyable (the storage is a named resource; move it instead).
class QuantizedActsBuffer {
 public:
  QuantizedActsBuffer() = default;
  ~QuantizedActsBuffer() { std::free(storage_); }
  QuantizedActsBuffer(const QuantizedActsBuffer&) = delete;
  QuantizedActsBuffer& operator=(const QuantizedActsBuffer&) = delete;

  // Makes room for [num_tokens, cols] (contents undefined until quantized).
  // Precondition: cols % kActBlock == 0, num_tokens >= 0.
  void resize(int64_t num_tokens, int64_t cols);

  QuantizedActs view() const { return {qs_, d_, s32_, s16_, cols_}; }
  int16_t* qs() { return qs_; }
  float* d() { return d_; }
  float* s32() { return s32_; }
  float* s16() { return s16_; }

 private:
  void* storage_ = nullptr;
  int64_t capacity_bytes_ = 0;
  int64_t cols_ = 0;
  int16_t* qs_ = nullptr;
  float* d_ = nullptr;
  float* s32_ = nullptr;
  float* s16_ = nullptr;
};

// Where one quantize call writes: pointers to the first row it fills (row t0
// of a buffer is qs + t0 * cols, d + t0 * cols / 32 ...), so threads can
// quantize disjoint token ranges of one buffer.
struct QuantizedActsOut {
  int16_t* qs;
  float* d;
  float* s32;
  float* s16;
};

// Quantizes x [num_tokens, cols] into out (rows laid out as above with
// `cols` values per row). Scalar reference: the AVX2 version gives the same
// bits (same scale, one float multiply and round-to-nearest-even per value).
// Cost: one pass over x. Precondition: cols % kActBlock == 0. Non-finite
// input gives unspecified (but defined) values for its block.
void quantize_acts_ref(const float* x, int64_t num_tokens, int64_t cols, const QuantizedActsOut& out);

// out [cols] = d * q of token t of `a` (the values the integer path
// multiplies; for tests and references).
void dequantize_acts(const QuantizedActs& a, int64_t t, float* out);

}  // namespace tokenmill::kernels
