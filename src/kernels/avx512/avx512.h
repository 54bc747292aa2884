// What the AVX-512 kernels (*_avx512.cc, compiled with -mavx512f -mavx512bw
// -mavx512vnni on top of AVX2's flags) export for the x86 tables
// (x86/tables_x86.cc): the 512-bit versions of some AVX2 kernels, same
// contracts, same results bit for bit. Declarations only, like avx2/avx2.h;
// never call them unless kernels_for(Isa::kAvx512) is non-null.
#pragma once

#include <cstdint>

#include "gguf/tensor_type.h"
#include "kernels/paged_attention.h"
#include "kernels/quantize_act.h"
#include "kernels/type_kernels.h"

namespace tokenmill::kernels::avx512 {

// avx2::gemm_packed with 512-bit vectors (gemm_avx512.cc).
void gemm_packed(const float* packed, int64_t num_rows, int64_t cols, const float* x, int64_t x_stride,
                 int64_t num_tokens, float* y, int64_t y_stride);

// avx2::gemm_q16_packed with 512-bit vectors and vpdpwssd
// (gemm_q16_avx512.cc).
void gemm_q16_packed(const int16_t* packed_q, const float* packed_scale, const float* packed_bias, bool halves,
                     int bias, int64_t num_rows, int64_t cols, const QuantizedActs& a, int64_t num_tokens, float* y,
                     int64_t y_stride);

// avx2::gemm_interleaved with 512-bit vectors and vpdpwssd, for the same
// types: Q4_0, Q8_0, Q4_K, Q6_K (gemm_interleaved_avx512.cc).
template <gguf::TensorType T>
struct InterleavedKernels {
  static const TypeKernels::GemmInterleaved gemm_interleaved;
};

// F32 and F16 caches with head_dim a multiple of 16 (up to 256) and no
// soft-capping; anything else goes to avx2::paged_attend_group
// (paged_attention_avx512.cc).
void paged_attend_group(const PagedKv& kv, const int32_t* block_table, int64_t kv_head, const float* q,
                        int64_t num_heads, int64_t j_begin, int64_t j_end, int64_t head_dim, float scale, float softcap,
                        float* out, float* weights);

}  // namespace tokenmill::kernels::avx512
