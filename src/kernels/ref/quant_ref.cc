// Dispatch of the scalar reference (de)quantizers by GGUF tensor type, and
// the float types (F32, F16, BF16), which need no blocks.
#include <cstring>

#include "kernels/quant.h"
#include "kernels/ref/quant_ref_internal.h"
#include "util/check.h"
#include "util/fp16.h"

namespace tokenmill::kernels {
namespace {

using gguf::TensorType;

// Elements per block of each type tokenmill computes with (mirrors
// gguf::tensor_type_info, kept here so kernels need no table lookup).
int64_t block_elements(TensorType type) {
  switch (type) {
    case TensorType::F32:
    case TensorType::F16:
    case TensorType::BF16: return 1;
    case TensorType::Q4_0:
    case TensorType::Q4_1:
    case TensorType::Q5_0:
    case TensorType::Q5_1:
    case TensorType::Q8_0:
    case TensorType::Q8_1: return kQK8_0;
    case TensorType::Q2_K:
    case TensorType::Q3_K:
    case TensorType::Q4_K:
    case TensorType::Q5_K:
    case TensorType::Q6_K:
    case TensorType::Q8_K: return kQK_K;
  }
  return 0;
}

void check_row(TensorType type, int64_t n) {
  const int64_t bs = block_elements(type);
  TM_CHECK_MSG(bs > 0, "unknown tensor type");
  TM_CHECK_MSG(n >= 0 && n % bs == 0, "row length is not a multiple of the block size");
}

}  // namespace

void dequantize_row_ref(gguf::TensorType type, const void* src, float* dst, int64_t n) {
  check_row(type, n);
  const int64_t nb = n / block_elements(type);
  switch (type) {
    case TensorType::F32: std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float)); return;
    case TensorType::F16: {
      const auto* h = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = fp16_to_fp32(h[i]);
      return;
    }
    case TensorType::BF16: {
      const auto* h = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_fp32(h[i]);
      return;
    }
    case TensorType::Q4_0: return detail::dequantize_q4_0(static_cast<const BlockQ4_0*>(src), dst, nb);
    case TensorType::Q4_1: return detail::dequantize_q4_1(static_cast<const BlockQ4_1*>(src), dst, nb);
    case TensorType::Q5_0: return detail::dequantize_q5_0(static_cast<const BlockQ5_0*>(src), dst, nb);
    case TensorType::Q5_1: return detail::dequantize_q5_1(static_cast<const BlockQ5_1*>(src), dst, nb);
    case TensorType::Q8_0: return detail::dequantize_q8_0(static_cast<const BlockQ8_0*>(src), dst, nb);
    case TensorType::Q8_1: return detail::dequantize_q8_1(static_cast<const BlockQ8_1*>(src), dst, nb);
    case TensorType::Q2_K: return detail::dequantize_q2_k(static_cast<const BlockQ2_K*>(src), dst, nb);
    case TensorType::Q3_K: return detail::dequantize_q3_k(static_cast<const BlockQ3_K*>(src), dst, nb);
    case TensorType::Q4_K: return detail::dequantize_q4_k(static_cast<const BlockQ4_K*>(src), dst, nb);
    case TensorType::Q5_K: return detail::dequantize_q5_k(static_cast<const BlockQ5_K*>(src), dst, nb);
    case TensorType::Q6_K: return detail::dequantize_q6_k(static_cast<const BlockQ6_K*>(src), dst, nb);
    case TensorType::Q8_K: return detail::dequantize_q8_k(static_cast<const BlockQ8_K*>(src), dst, nb);
  }
}

bool can_quantize(gguf::TensorType type) { return block_elements(type) > 0; }

void quantize_row_ref(gguf::TensorType type, const float* src, void* dst, int64_t n, const float* importance) {
  check_row(type, n);
  const int64_t nb = n / block_elements(type);
  switch (type) {
    case TensorType::F32: std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float)); return;
    case TensorType::F16: {
      auto* h = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) h[i] = fp32_to_fp16(src[i]);
      return;
    }
    case TensorType::BF16: {
      auto* h = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) h[i] = fp32_to_bf16(src[i]);
      return;
    }
    case TensorType::Q4_0: return detail::quantize_q4_0(src, static_cast<BlockQ4_0*>(dst), nb);
    case TensorType::Q4_1: return detail::quantize_q4_1(src, static_cast<BlockQ4_1*>(dst), nb);
    case TensorType::Q5_0: return detail::quantize_q5_0(src, static_cast<BlockQ5_0*>(dst), nb);
    case TensorType::Q5_1: return detail::quantize_q5_1(src, static_cast<BlockQ5_1*>(dst), nb);
    case TensorType::Q8_0: return detail::quantize_q8_0(src, static_cast<BlockQ8_0*>(dst), nb);
    case TensorType::Q8_1: return detail::quantize_q8_1(src, static_cast<BlockQ8_1*>(dst), nb);
    case TensorType::Q2_K: return detail::quantize_q2_k(src, static_cast<BlockQ2_K*>(dst), nb, importance);
    case TensorType::Q3_K: return detail::quantize_q3_k(src, static_cast<BlockQ3_K*>(dst), nb, importance);
    case TensorType::Q4_K: return detail::quantize_q4_k(src, static_cast<BlockQ4_K*>(dst), nb, importance);
    case TensorType::Q5_K: return detail::quantize_q5_k(src, static_cast<BlockQ5_K*>(dst), nb, importance);
    case TensorType::Q6_K: return detail::quantize_q6_k(src, static_cast<BlockQ6_K*>(dst), nb, importance);
    case TensorType::Q8_K: return detail::quantize_q8_k(src, static_cast<BlockQ8_K*>(dst), nb);
  }
}

}  // namespace tokenmill::kernels
