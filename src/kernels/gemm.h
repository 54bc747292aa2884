// Packed-panel FP32 GEMM for prefill: the weight rows of a panel are stored
// transposed in groups of kPackRows (two AVX2 vectors of rows per column), so
// the micro-kernel is an outer product: for each column k it loads 16 row
// values, broadcasts x[t, k] of 6 tokens and issues 12 FMAs into 12
// accumulators that hold 16 rows x 6 tokens of y. No horizontal sums, and
// the columns are walked in chunks of kPackChunk so a group's chunk (16 KiB)
// stays in L1 while every token passes over it, and the x chunk of all
// tokens stays in L2 while the panel's groups pass over it. Measured on the
// 2-core Zen 5 box: 118-123 GFLOP/s per core on TinyLlama shapes with 512
// tokens, against 100-112 for the row-major 4x3 dot-product tiles.
//
// Every output is one FMA chain over k = 0 .. cols-1 in order (a chunk
// continues from the value the previous chunk left in y), so results do not
// depend on the chunking, the tiling or the thread split.
//
// Packed layout of a panel of num_rows rows (padded to P = round_up(num_rows,
// kPackRows) with zero rows) and `cols` columns: for the chunk starting at
// column k0 (kn = min(kPackChunk, cols - k0) columns), at offset k0 * P,
// group g (rows 16g .. 16g+15) at + g * kn * 16, element (16 g + i, k0 + j)
// at + j * 16 + i. Total cols * P floats, 64-byte aligned when the buffer is.
#pragma once

#include <cstdint>

#include "gguf/tensor_type.h"
#include "kernels/quantize_act.h"

namespace tokenmill::kernels {

inline constexpr int64_t kPackRows = 16;
// matmul packs panels from this many tokens up; fewer tokens use row-major
// panels and the 4x3 dot-product tiles, which are as fast or faster there
// (kernels_bench Gemm .../path 2; docs/benchmarks.md, kernel tuning).
inline constexpr int64_t kPackedMinTokens = 96;
inline constexpr int64_t kPackChunk = 256;
// Rows a pack call takes at once (one 8 x 8 transpose height).
inline constexpr int64_t kPackStep = 8;

// Floats of a packed panel of num_rows rows of `cols` columns.
inline int64_t packed_panel_floats(int64_t num_rows, int64_t cols) {
  return (num_rows + kPackRows - 1) / kPackRows * kPackRows * cols;
}

// How a quantized type's integer products are scaled: one float scale per
// 16 columns (halves) or per 32, and the granularity of its additive term
// (offset or minimum; 0: none, 16 or 32 columns).
struct Q16Layout {
  bool halves = false;
  int bias = 0;
};

// The int16 GEMM's numerics in scalar code (ref/gemm_q16_ref.cc): the exact
// reference that gemm_q16_packed and gemm_interleaved (both ISAs) must equal
// bit for bit. Rows as q16_decode_row (vec_dot.h) gives them: q
// [num_rows, cols], scale16 / bias16 [num_rows, cols / 16]. Per 32-column
// block, in order: acc = fma(float(integer sum), scale * d_token, acc) for
// the block (or for each 16-column half where layout.halves), then
// acc = fma(bias, activation sum, acc) for its additive terms; y[t * y_stride
// + r] = acc for r < num_rows, t < num_tokens. Precondition: cols % 32 == 0,
// a.cols == cols. Cost: num_rows * num_tokens * cols scalar products.
void gemm_q16_ref(const int16_t* q, const float* scale16, const float* bias16, Q16Layout layout, int64_t num_rows,
                  int64_t cols, const QuantizedActs& a, int64_t num_tokens, float* y, int64_t y_stride);

namespace avx2 {

// Writes rows [row0, row0 + kPackStep) of a packed panel of padded height
// panel_rows (a multiple of kPackRows; row0 a multiple of kPackStep) from
// src: num_src rows (<= kPackStep) of `cols` floats at src_stride; the
// remaining rows of the step are written as zeros.
void pack_rows(const float* src, int64_t src_stride, int64_t num_src, int64_t cols, int64_t row0, int64_t panel_rows,
               float* packed);

// y[t * y_stride + r] = sum_k panel[r, k] * x[t * x_stride + k] for
// r < num_rows, t < num_tokens. packed: a panel of num_rows rows (padded
// height round_up(num_rows, kPackRows)) and `cols` columns.
void gemm_packed(const float* packed, int64_t num_rows, int64_t cols, const float* x, int64_t x_stride,
                 int64_t num_tokens, float* y, int64_t y_stride);

// The int16 variant for quantized weights (gemm_q16_avx2.cc): rows widened
// by q16_decode_row (vec_dot.h), activations quantized to int16 blocks
// (quantize_act.h), exact integer sums per 32 (or 16) columns, one float
// scaling per block; same numerics as the integer decode path. Packed
// layout of the int16 values as above with column pairs interleaved: in the
// chunk at k0 (offset k0 * P), group g at + g * kn * 16, element
// (16 g + i, k0 + 2 j + e) at + 32 j + 2 i + e. Scales and biases: per 16
// columns h and row r at h * P + r (P floats per half, cols / 16 halves).
//
// Writes rows [row0, row0 + kPackStep) of such a panel from num_src (<=
// kPackStep) decoded rows: q [num_src, cols], scale16 / bias16
// [num_src, cols / 16]; rows past num_src become zeros.
void pack_q16_rows(const int16_t* q, const float* scale16, const float* bias16, int64_t num_src, int64_t cols,
                   int64_t row0, int64_t panel_rows, int16_t* packed_q, float* packed_scale, float* packed_bias);

// pack_q16_rows straight from the blocks of num_src (<= kPackStep) rows at
// `rows`, row_bytes apart, of a type with q16 kernels: the same panel
// contents as q16_decode_row then pack_q16_rows, in one pass
// (pack_q4_0_avx2.cc). Returns false, writing nothing, for a type it has no
// direct packer for.
bool pack_q16_blocks_supports(gguf::TensorType type);
bool pack_q16_blocks(gguf::TensorType type, const uint8_t* rows, int64_t row_bytes, int64_t num_src, int64_t cols,
                     int64_t row0, int64_t panel_rows, int16_t* packed_q, float* packed_scale, float* packed_bias);

// y[t * y_stride + r] = panel row r . dequant(a[t]) for r < num_rows,
// t < num_tokens; `halves` / `bias` as q16_layout (vec_dot.h) of the type.
// Precondition: cols % 32 == 0, a.cols == cols.
void gemm_q16_packed(const int16_t* packed_q, const float* packed_scale, const float* packed_bias, bool halves,
                     int bias, int64_t num_rows, int64_t cols, const QuantizedActs& a, int64_t num_tokens, float* y,
                     int64_t y_stride);

// Rows [row_begin, row_end) of a matrix of `type` (Q4_0, Q8_0, Q4_K or
// Q6_K: interleave_supported) in its x 16 layout (interleave.h) times the
// quantized activations of num_tokens tokens: y[t * y_stride + r].
// row_begin is a multiple of 16, row_end one too or `rows`. Results equal
// gemm_q16_packed's on the same rows, bit for bit
// (gemm_interleaved_avx2.cc).
void gemm_interleaved(gguf::TensorType type, const uint8_t* packed, int64_t rows, int64_t cols, int64_t row_begin,
                      int64_t row_end, const QuantizedActs& a, int64_t num_tokens, float* y, int64_t y_stride);

}  // namespace avx2

namespace avx512 {

// gemm_packed with 512-bit vectors (gemm_avx512.cc): same panel layout and
// contract, results equal to the AVX2 kernel's bit for bit.
void gemm_packed(const float* packed, int64_t num_rows, int64_t cols, const float* x, int64_t x_stride,
                 int64_t num_tokens, float* y, int64_t y_stride);

// gemm_q16_packed with 512-bit vectors and vpdpwssd (gemm_q16_avx512.cc):
// same panel layout, same contract, results equal to the AVX2 kernel's bit
// for bit.
void gemm_q16_packed(const int16_t* packed_q, const float* packed_scale, const float* packed_bias, bool halves,
                     int bias, int64_t num_rows, int64_t cols, const QuantizedActs& a, int64_t num_tokens, float* y,
                     int64_t y_stride);

// avx2::gemm_interleaved with 512-bit vectors and vpdpwssd
// (gemm_interleaved_avx512.cc): same layouts, same contract, same bits.
void gemm_interleaved(gguf::TensorType type, const uint8_t* packed, int64_t rows, int64_t cols, int64_t row_begin,
                      int64_t row_end, const QuantizedActs& a, int64_t num_tokens, float* y, int64_t y_stride);

}  // namespace avx512
}  // namespace tokenmill::kernels
