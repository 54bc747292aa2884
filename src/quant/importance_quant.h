// Importance-aware quantization of one row: the scale (and offset) of each
// block are chosen to minimise the importance-weighted squared error
// sum_i w_i (x_i - x^_i)^2, where w_i is the imatrix's mean squared
// activation of column i: the expected squared output error a weight error
// in that column causes (the objective of imatrix / AWQ-style quantization).
//
// K-quants (Q2_K..Q6_K) get the weights through the reference quantizers'
// own scale search (kernels/quant.h). The legacy 4- and 5-bit types, whose
// reference quantizers round with the block's natural scale, get a search
// here: about 20 candidate scales per block around the natural one, each
// refined by the weighted least-squares scale (and offset) for its codes,
// scored with the fp16-rounded values the file will hold; the natural-scale
// block (the reference quantizer's output) is always a candidate, so the
// weighted error is never worse than plain rounding. Other types ignore the
// weights. Output bytes are GGUF blocks any reader decodes.
#pragma once

#include <cstdint>

#include "gguf/tensor_type.h"

namespace tokenmill::quant {

// Whether this file's search handles `type` (Q4_0, Q4_1, Q5_0, Q5_1).
bool has_weighted_search(gguf::TensorType type);

// Quantizes src[0..n) into dst (row_bytes(type, n) bytes). importance [n]
// may be null (then exactly quantize_row_ref). Preconditions:
// kernels::can_quantize(type), n a multiple of the block size.
// Cost: legacy types with importance ~20x plain rounding.
void quantize_row_weighted(gguf::TensorType type, const float* src, void* dst, int64_t n, const float* importance);

}  // namespace tokenmill::quant
