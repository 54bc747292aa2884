// The NEON (AArch64 Advanced SIMD) kernels, built only for AArch64
// (*_neon.cc; their table is made in tables_neon.cc). Same contracts as
// the KernelTable entries they fill (dispatch.h).
//
// What they cover: the integer decode path (activations quantized to int16
// blocks, quantize_act.h; weights widened per 32-column sub-block and
// multiplied with SMULL/SMLAL into exact int32 sums, type_kernels.h's numerics)
// for Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K and Q6_K, the FP32 panel
// product that prefill and the other types use, and attention over float
// K/V. Everything else in the NEON table (norms, activations, FP8, W8A8) is
// the scalar reference.
//
// Why no dot-product extension (SDOT): it multiplies 8-bit values, and the
// activations here are 16-bit (quantize_act.h explains why: 8-bit blocks put
// Gemma 3 270M outside its KL budget), so SDOT would need a second, coarser
// activation format.
#pragma once

#include <cstdint>

#include "gguf/tensor_type.h"
#include "kernels/matmul.h"
#include "kernels/paged_attention.h"
#include "kernels/quantize_act.h"
#include "kernels/type_kernels.h"

namespace tokenmill::kernels::neon {

// KernelTable::gemm_f32: 4 x 4 register tiles of (rows x tokens), each
// output one 4-lane FMA chain over the columns, then its lanes summed and
// the remaining (cols % 4) columns added in order: the same operations
// whatever the tiling (matmul_neon.cc).
void gemm_f32(const float* w, int64_t w_stride, int64_t num_rows, const float* x, int64_t x_stride, int64_t num_tokens,
              int64_t cols, float* y, int64_t y_stride);

// KernelTable::quantize_acts: the reference's bits (matmul_neon.cc).
void quantize_acts(const float* x, int64_t num_tokens, int64_t cols, const QuantizedActsOut& out);

// TypeKernels::q16_rows of Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K and Q6_K
// (vec_dot_neon.cc; a constant, as in avx2/avx2.h).
template <gguf::TensorType T>
struct Q16Kernels {
  static const TypeKernels::Q16Rows q16_rows;
};

// KernelTable::attend_head / paged_attend_group (attention_neon.cc): the
// scalar kernels' online softmax with vector dot products and row updates,
// for head_dim a multiple of 4 up to 512 and F32 or F16 caches; other
// shapes and the quantized caches go to the scalar kernels.
void attend_head(const float* q, const float* k, const float* v, int64_t kv_stride, int64_t j_begin, int64_t j_end,
                 int64_t head_dim, float scale, float softcap, float* out);
void paged_attend_group(const PagedKv& kv, const int32_t* block_table, int64_t kv_head, const float* q,
                        int64_t num_heads, int64_t j_begin, int64_t j_end, int64_t head_dim, float scale, float softcap,
                        float* out, float* weights);

}  // namespace tokenmill::kernels::neon
