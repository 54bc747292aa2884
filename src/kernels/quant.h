// Scalar reference (de)quantization for every GGUF tensor type tokenmill
// reads. These are the ground truth every optimised kernel is tested against.
// Block layouts are GGUF's (see quant_blocks.h).
#pragma once

#include <cstdint>

#include "gguf/tensor_type.h"

namespace tokenmill::kernels {

// dst[0..n) = values of the n elements stored in src.
// Precondition: n is a multiple of the type's block size (checked).
void dequantize_row_ref(gguf::TensorType type, const void* src, float* dst, int64_t n);

// Whether quantize_row_ref supports the type.
bool can_quantize(gguf::TensorType type);

// Quantizes src[0..n) into the type's blocks at dst (row_bytes(type, n)
// bytes). `importance` (may be null) weights each element's squared error
// when the quantizer searches for scales; null means uniform weights.
// Precondition: can_quantize(type) and n a multiple of the block size.
void quantize_row_ref(gguf::TensorType type, const float* src, void* dst, int64_t n,
                      const float* importance = nullptr);

}  // namespace tokenmill::kernels
