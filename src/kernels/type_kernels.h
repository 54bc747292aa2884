// One weight type's kernels on one ISA: a row of KernelTable (dispatch.h).
//
// A null member means "this ISA has no kernel of that kind for this type";
// matmul (choose_path in matmul.cc) then takes the next path. There is no
// separate "supports" list to keep in step with the kernels: a type is
// supported exactly where its row has the pointer. Each ISA fills its rows
// in its one registration file (dispatch.cc: scalar, x86/tables_x86.cc:
// AVX2 and AVX-512, neon/tables_neon.cc: NEON), starting from the table it
// extends, so a type without a faster kernel keeps the reference's.
//
// The integer path (q16_*, pack_q16_blocks, gemm_interleaved) shares one set
// of numerics, fixed per type by q16_layout (gemm.h): for each 32-element
// sub-block the weights are widened to int16 (any integer sub-scale folded
// in), multiplied with the int16 activations (quantize_act.h) into exact
// integer sums, and each sum is scaled by the float factors of both sides:
//   y[t, r] = sum_s scale_w[r, s] * d_a[t, s] * (w[r, s] . q_a[t, s])
//           + sum_k bias_w[r, k] * s_a[t, k]      (types with an offset)
// which is W[r] . dequant(a[t]) up to float rounding; the reference is
// matmul_ref(W, dequantize_acts(a)) (vec_dot_test.cc).
#pragma once

#include <cstdint>

#include "kernels/matmul.h"
#include "kernels/quantize_act.h"

namespace tokenmill::kernels {

struct TypeKernels {
  // dst[0..n) = the elements of one row stored at src. Every table has one
  // for every type (the scalar table's is dequantize_row_ref).
  using DequantizeRow = void (*)(const void* src, float* dst, int64_t n);
  // Fused dequantize-and-dot for decode with float activations: for rows
  // [row_begin, row_end) and t < num_tokens (<= kMaxFusedTokens):
  // y[t * w.rows + r] = W[r] . x[t]; the row is never stored as floats.
  using FusedRows = void (*)(const WeightView& w, int64_t row_begin, int64_t row_end, const float* x,
                             int64_t num_tokens, float* y);
  // Integer dot products for decode: y[t * w.rows + r] = W[r] . dequant(a[t])
  // for rows [row_begin, row_end) and t < num_tokens (<= kMaxQ16RowTokens).
  // One pass over the rows' bytes; each output is computed by the same
  // operations whatever the row range, so results do not depend on how rows
  // are split over threads.
  using Q16Rows = void (*)(const WeightView& w, int64_t row_begin, int64_t row_end, const QuantizedActs& a,
                           int64_t num_tokens, float* y);
  // One row widened for the packed int16 GEMM (gemm.h): q [cols] the int16
  // values the integer products use, and per 16 columns the float scale and
  // additive coefficient (per-32 values repeated for both halves), so that
  // row . x = sum_h scale16[h] * (q_h . q_x_h) * d_x + bias16[h] * s16_x[h].
  using Q16DecodeRow = void (*)(const void* row, int64_t cols, int16_t* q, float* scale16, float* bias16);
  // q16_decode_row then pack_q16_rows (gemm.h) for num_src (<= kPackStep)
  // rows at `rows`, row_bytes apart, in one pass over their blocks: the same
  // panel contents.
  using PackQ16Blocks = void (*)(const uint8_t* rows, int64_t row_bytes, int64_t num_src, int64_t cols, int64_t row0,
                                 int64_t panel_rows, int16_t* packed_q, float* packed_scale, float* packed_bias);
  // Rows [row_begin, row_end) (multiples of kInterleaveRows, or w.rows) of
  // w's copy interleaved at load (w.interleaved, interleave.h) times the
  // quantized activations of any number of tokens: y[t * w.rows + r], equal
  // bit for bit to the packed int16 GEMM on the same rows.
  using GemmInterleaved = void (*)(const WeightView& w, int64_t row_begin, int64_t row_end, const QuantizedActs& a,
                                   int64_t num_tokens, float* y);

  DequantizeRow dequantize_row = nullptr;
  FusedRows fused_rows = nullptr;
  Q16Rows q16_rows = nullptr;
  // Calls of up to this many tokens (<= kMaxQ16RowTokens) use q16_rows (each
  // row decoded once per 4 tokens, read from memory once); longer ones the
  // packed int16 GEMM, whose per-call repacking of every row the tokens must
  // repay. Where that happens depends on the ISA's micro-kernel and on
  // whether the type packs straight from its blocks (pack_q16_blocks):
  // measured with kernels_bench (GemmSwitch; docs/benchmarks.md, kernel
  // tuning).
  int64_t q16_row_max_tokens = 0;
  Q16DecodeRow q16_decode_row = nullptr;
  PackQ16Blocks pack_q16_blocks = nullptr;
  GemmInterleaved gemm_interleaved = nullptr;
};

// The most tokens a fused decode kernel handles in one call.
inline constexpr int64_t kMaxFusedTokens = 4;
// The most tokens q16_rows takes in one call.
inline constexpr int64_t kMaxQ16RowTokens = 16;

}  // namespace tokenmill::kernels
