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
  friend constexpr bool operator==(const Q16Layout&, const Q16Layout&) = default;
};

// The layout of each quantized type's int16 form: part of the integer
// path's numerics, so every ISA's decoders and the reference agree on it
// (the decoders check theirs against it at compile time). Offsets and
// minimums go through the activation sums: per 32 columns for the legacy
// types with an offset (Q4_0's -8 d, Q5_0's -16 d, Q4_1 / Q5_1's m) and for
// Q4_K / Q5_K's minimums, per 16 for Q2_K's; Q2_K, Q3_K and Q6_K have a
// scale per 16 columns. Types without an int16 form get {}.
constexpr Q16Layout q16_layout(gguf::TensorType type) {
  using gguf::TensorType;
  switch (type) {
    case TensorType::Q4_0:
    case TensorType::Q4_1:
    case TensorType::Q5_0:
    case TensorType::Q5_1:
    case TensorType::Q4_K:
    case TensorType::Q5_K: return {false, 32};
    case TensorType::Q2_K: return {true, 16};
    case TensorType::Q3_K:
    case TensorType::Q6_K: return {true, 0};
    default: return {};  // Q8_0: one scale per 32, no offset
  }
}

// The int16 GEMM's numerics in scalar code (ref/gemm_q16_ref.cc): the exact
// reference that gemm_q16_packed and gemm_interleaved (both ISAs) must equal
// bit for bit. Rows as q16_decode_row (type_kernels.h) gives them: q
// [num_rows, cols], scale16 / bias16 [num_rows, cols / 16]. Per 32-column
// block, in order: acc = fma(float(integer sum), scale * d_token, acc) for
// the block (or for each 16-column half where layout.halves), then
// acc = fma(bias, activation sum, acc) for its additive terms; y[t * y_stride
// + r] = acc for r < num_rows, t < num_tokens. Precondition: cols % 32 == 0,
// a.cols == cols. Cost: num_rows * num_tokens * cols scalar products.
void gemm_q16_ref(const int16_t* q, const float* scale16, const float* bias16, Q16Layout layout, int64_t num_rows,
                  int64_t cols, const QuantizedActs& a, int64_t num_tokens, float* y, int64_t y_stride);

}  // namespace tokenmill::kernels
