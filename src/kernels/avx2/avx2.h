// What the AVX2 kernels (*_avx2.cc, compiled with -mavx2 -mfma -mf16c)
// export for the x86 tables (x86/tables_x86.cc). Declarations only, so that
// files built without AVX can include it; the contracts are those of the
// KernelTable entries and TypeKernels members they fill (dispatch.h,
// type_kernels.h, gemm.h). Never call them unless kernels_for(Isa::kAvx2)
// is non-null.
//
// The per-type kernels are function pointers held by class templates over
// the type, defined in their file and instantiated there for the types
// listed with them: reading one of another type fails to link. They are
// constants (constinit), so making a table reads them without running any
// AVX code.
#pragma once

#include <cstdint>

#include "gguf/tensor_type.h"
#include "kernels/fp8.h"
#include "kernels/matmul.h"
#include "kernels/paged_attention.h"
#include "kernels/quantize_act.h"
#include "kernels/type_kernels.h"

namespace tokenmill::kernels::avx2 {

// --- ops (ops_avx2.cc) ---
void rms_norm(const float* x, const float* w, float* out, int64_t n, float eps);
void swiglu(float* gate, const float* up, int64_t n);
void geglu_tanh(float* gate, const float* up, int64_t n);
void softmax(float* x, int64_t n);
void add_inplace(float* y, const float* x, int64_t n);
void scale_inplace(float* x, float s, int64_t n);

// --- FP32 products ---
// 4 x 3 register tiles of row-major rows (matmul_avx2.cc).
void gemm_f32(const float* w, int64_t w_stride, int64_t num_rows, const float* x, int64_t x_stride, int64_t num_tokens,
              int64_t cols, float* y, int64_t y_stride);
// Writes rows [row0, row0 + kPackStep) of a packed panel of padded height
// panel_rows (a multiple of kPackRows; row0 a multiple of kPackStep) from
// src: num_src rows (<= kPackStep) of `cols` floats at src_stride; the
// remaining rows of the step are written as zeros (gemm_avx2.cc).
void pack_rows(const float* src, int64_t src_stride, int64_t num_src, int64_t cols, int64_t row0, int64_t panel_rows,
               float* packed);
// y[t * y_stride + r] = sum_k panel[r, k] * x[t * x_stride + k] for
// r < num_rows, t < num_tokens. packed: a panel of num_rows rows (padded
// height round_up(num_rows, kPackRows)) and `cols` columns (gemm_avx2.cc).
void gemm_packed(const float* packed, int64_t num_rows, int64_t cols, const float* x, int64_t x_stride,
                 int64_t num_tokens, float* y, int64_t y_stride);

// --- the integer path's type-independent parts ---
// quantize_acts_ref's bits (quantize_act_avx2.cc).
void quantize_acts(const float* x, int64_t num_tokens, int64_t cols, const QuantizedActsOut& out);
// The int16 panels (gemm_q16_avx2.cc). Packed layout of the int16 values as
// gemm.h's with column pairs interleaved: in the chunk at k0 (offset
// k0 * P), group g at + g * kn * 16, element (16 g + i, k0 + 2 j + e) at
// + 32 j + 2 i + e. Scales and biases: per 16 columns h and row r at
// h * P + r (P floats per half, cols / 16 halves).
//
// pack_q16_rows writes rows [row0, row0 + kPackStep) of such a panel from
// num_src (<= kPackStep) decoded rows: q [num_src, cols], scale16 / bias16
// [num_src, cols / 16]; rows past num_src become zeros.
void pack_q16_rows(const int16_t* q, const float* scale16, const float* bias16, int64_t num_src, int64_t cols,
                   int64_t row0, int64_t panel_rows, int16_t* packed_q, float* packed_scale, float* packed_bias);
// y[t * y_stride + r] = panel row r . dequant(a[t]) for r < num_rows,
// t < num_tokens; `halves` / `bias` as q16_layout (gemm.h) of the type.
// Precondition: cols % 32 == 0, a.cols == cols.
void gemm_q16_packed(const int16_t* packed_q, const float* packed_scale, const float* packed_bias, bool halves,
                     int bias, int64_t num_rows, int64_t cols, const QuantizedActs& a, int64_t num_tokens, float* y,
                     int64_t y_stride);

// --- per weight type (TypeKernels members) ---
// Float rows: F32, F16, BF16 (matmul_avx2.cc).
template <gguf::TensorType T>
struct FloatRowKernels {
  static const TypeKernels::DequantizeRow dequantize_row;
  static const TypeKernels::FusedRows fused_rows;
};
// Blocks decoded to floats: Q8_0, Q4_0, Q5_0, Q4_K, Q6_K
// (matmul_quant_avx2.cc).
template <gguf::TensorType T>
struct BlockFloatKernels {
  static const TypeKernels::DequantizeRow dequantize_row;
  static const TypeKernels::FusedRows fused_rows;
};
// The integer path: Q8_0, Q4_0, Q4_1, Q5_0, Q5_1 (vec_dot_legacy_avx2.cc)
// and Q2_K, Q3_K, Q4_K, Q5_K, Q6_K (vec_dot_k_avx2.cc).
template <gguf::TensorType T>
struct Q16LegacyKernels {
  static const TypeKernels::Q16Rows q16_rows;
  static const TypeKernels::Q16DecodeRow q16_decode_row;
};
template <gguf::TensorType T>
struct Q16KQuantKernels {
  static const TypeKernels::Q16Rows q16_rows;
  static const TypeKernels::Q16DecodeRow q16_decode_row;
};
// Int16 panels packed straight from the blocks: Q4_0 (pack_q4_0_avx2.cc).
template <gguf::TensorType T>
struct PackBlocksKernels {
  static const TypeKernels::PackQ16Blocks pack_q16_blocks;
};
// Weights interleaved at load: Q4_0, Q8_0, Q4_K, Q6_K
// (gemm_interleaved_avx2.cc).
template <gguf::TensorType T>
struct InterleavedKernels {
  static const TypeKernels::GemmInterleaved gemm_interleaved;
};

// --- FP8 and W8A8 ---
// Rows [row_begin, row_end) of matmul_fp8 (fp8_avx2.cc).
void matmul_fp8_rows(const Fp8Matrix& w, int64_t row_begin, int64_t row_end, const float* x, int64_t num_tokens,
                     float* y);
// dst[0..n) = e4m3 bytes src[0..n) as floats times `scale` (n any).
void fp8_to_fp32_scaled(const uint8_t* src, float scale, float* dst, int64_t n);
// Rows [row_begin, row_end) for quantized activations qx [num_tokens, cols]
// (num_tokens <= 4), scales sx [num_tokens] (w8a8_avx2.cc).
void w8a8_rows(const WeightView& w, int64_t row_begin, int64_t row_end, const int8_t* qx, const float* sx,
               int64_t num_tokens, float* y);

// --- attention (attention_avx2.cc, paged_attention_avx2.cc) ---
void attend_head(const float* q, const float* k, const float* v, int64_t kv_stride, int64_t j_begin, int64_t j_end,
                 int64_t head_dim, float scale, float softcap, float* out);
void paged_attend_group(const PagedKv& kv, const int32_t* block_table, int64_t kv_head, const float* q,
                        int64_t num_heads, int64_t j_begin, int64_t j_end, int64_t head_dim, float scale, float softcap,
                        float* out, float* weights);

}  // namespace tokenmill::kernels::avx2
