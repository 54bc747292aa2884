// FP8 E4M3 ("E4M3FN" of the OCP 8-bit floating point spec): 1 sign bit,
// 4 exponent bits (bias 7), 3 mantissa bits; no infinities, one NaN pattern
// per sign (S.1111.111); largest finite 448, smallest normal 2^-6, smallest
// subnormal 2^-9. Used for FP8 weights (MX-style blocks of 32 elements with a
// power-of-two scale each) and for the FP8 KV cache.
//
// Why power-of-two block scales for weights: E4M3 keeps the same relative
// precision over its whole normal range, so a finer scale buys almost
// nothing, while a power-of-two scale makes every dequantized weight exactly
// representable in BF16 (8 significant bits >= E4M3's 4). tokenmill stores
// FP8 weights in GGUF as BF16 tensors holding exactly those values (a type
// every GGUF reader knows) and packs them into Fp8Block form at load time,
// losslessly (see docs/quantization.md).
#pragma once

#include <cstdint>

#include "util/thread_pool.h"

namespace tokenmill::kernels {

inline constexpr float kFp8E4M3Max = 448.0f;
inline constexpr int kFp8Block = 32;

// The value of an E4M3 byte (NaN for the two NaN patterns).
float fp8_e4m3_to_fp32(uint8_t b);
// Round to nearest, ties to even; magnitudes above 448 saturate to +-448
// (the conversion quantizers want: no overflow to NaN); NaN -> 0x7F.
uint8_t fp32_to_fp8_e4m3(float f);

// A block of 32 weights: x[i] = e4m3(qs[i]) * 2^exp.
struct Fp8Block {
  int8_t exp;
  uint8_t qs[kFp8Block];
};
static_assert(sizeof(Fp8Block) == 33);

// The block exponent for values with largest magnitude `amax`: the smallest
// k with amax / 2^k <= 448 (0 for amax == 0).
int fp8_block_exponent(float amax);

// Packs src[0..n) into n / 32 blocks. Precondition: n % 32 == 0.
void quantize_row_fp8(const float* src, Fp8Block* dst, int64_t n);
// dst[0..n) = the blocks' values. Precondition: n % 32 == 0.
void dequantize_row_fp8(const Fp8Block* src, float* dst, int64_t n);
// dst[i] = src[i] rounded to the FP8 block grid (quantize + dequantize),
// in place allowed. Precondition: n % 32 == 0.
void round_row_to_fp8(const float* src, float* dst, int64_t n);

// A [rows, cols] matrix of FP8 blocks, row-major (cols / 32 blocks a row).
struct Fp8Matrix {
  const Fp8Block* blocks = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
};

// y[t, r] = sum_c W[r, c] * x[t, c] for t < num_tokens, W converted on the
// fly. x: [num_tokens, cols], y: [num_tokens, rows]. FP32 accumulation; rows
// split over the pool. AVX2 when the CPU has it (E4M3 -> FP16 is a bit
// shift, then F16C) in the AVX2 and AVX-512 tables, else scalar (the
// active kernel table's fp8_rows); both give the same result up to the order
// of float additions.
void matmul_fp8(const Fp8Matrix& w, const float* x, int64_t num_tokens, float* y, ThreadPool& pool);
// The scalar path, for tests.
void matmul_fp8_ref(const Fp8Matrix& w, const float* x, int64_t num_tokens, float* y);
// Rows [row_begin, row_end) of matmul_fp8 for num_tokens (<= 4) tokens:
// the scalar table's fp8_rows (dispatch.h).
void matmul_fp8_rows_ref(const Fp8Matrix& w, int64_t row_begin, int64_t row_end, const float* x, int64_t num_tokens,
                         float* y);

}  // namespace tokenmill::kernels
