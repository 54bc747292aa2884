// Scalar reference (de)quantization for every GGUF tensor type tokenmill
// reads. These are the ground truth every optimised kernel is tested against.
// Block layouts are GGUF's (see quant_blocks.h).
#pragma once

#include <cstdint>

#include "gguf/tensor_type.h"

namespace tokenmill::kernels {

// dst[0..n) = values of the n elements stored in src (row_bytes(type, n)
// bytes; block types at any alignment, F16/BF16 2-byte aligned).
// Single-threaded, O(n), no allocation.
// Precondition: n is a multiple of the type's block size (checked).
void dequantize_row_ref(gguf::TensorType type, const void* src, float* dst, int64_t n);

// Whether quantize_row_ref supports the type (every type in
// gguf::TensorType today: F32, F16, BF16, Q4_0..Q8_1, Q2_K..Q8_K).
bool can_quantize(gguf::TensorType type);

// Quantizes src[0..n) into the type's blocks at dst (row_bytes(type, n)
// bytes). `importance` [n] (may be null) weights each element's squared
// error when the K-quant quantizers (Q2_K..Q6_K) search for scales; null,
// or all weights zero, means uniform weights. The legacy and 8-bit types
// round to nearest with their standard scale and ignore it. Output is
// deterministic. Cost: legacy types ~60M elements/s, K-quants ~3M/s (one
// core); callers split large tensors by rows across threads.
// Precondition: can_quantize(type) and n a multiple of the block size.
void quantize_row_ref(gguf::TensorType type, const float* src, void* dst, int64_t n, const float* importance = nullptr);

}  // namespace tokenmill::kernels
