// Legacy 32-element blocks (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0) built from a scale,
// an offset and codes the caller already chose, for importers whose source
// is itself a grid of integer codes (GPTQ, AWQ) and must keep those codes
// rather than re-round the values (quant.h's quantizers pick their own).
#pragma once

#include <cstdint>

#include "gguf/tensor_type.h"

namespace tokenmill::kernels {

// Writes one block of `type` at dst: scale bits d (fp16), offset bits m
// (fp16; Q4_1 and Q5_1 only, ignored otherwise) and codes[32] as stored
// (Q4_0/Q4_1 0..15, Q5_0/Q5_1 0..31, Q8_0 -128..127), so that element j
// decodes to d * (codes[j] - 8) (Q4_0), d * (codes[j] - 16) (Q5_0),
// d * codes[j] (Q8_0) or d * codes[j] + m (Q4_1, Q5_1).
// Precondition (checked): a listed type and codes within its range.
// Cost: 32 element operations, no allocation.
void pack_legacy_block(gguf::TensorType type, uint16_t d, uint16_t m, const int* codes, void* dst);

}  // namespace tokenmill::kernels
