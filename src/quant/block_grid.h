// The grid one encoded GGUF block offers its elements, for quantizers that
// choose a block's scales first and then round element by element with
// them fixed (GPTQ: gptq.h). Every block type here stores, per element, an
// integer code c in [0, max_code] and decodes it as
//   x = step[i] * (c - zero) + offset[i]
// (step and offset per element, because the K-quants scale each 16- or
// 32-element sub-block on its own). read_block_grid() extracts the grid
// from a block encoded by any quantizer; write_block_codes() stores new
// codes into it, leaving the scales untouched. The layouts are the ones
// kernels/ref/quant_ref_*.cc decode (documented on quant_blocks.h).
#pragma once

#include <cstdint>

#include "gguf/tensor_type.h"

namespace tokenmill::quant {

inline constexpr int kMaxGridBlock = 256;

struct BlockGrid {
  int size = 0;      // elements in the block (32 or 256)
  int max_code = 0;  // codes are 0..max_code
  int zero = 0;      // the code that means "no step" (symmetric types)
  float step[kMaxGridBlock];
  float offset[kMaxGridBlock];

  // The code nearest to v on element i's grid, and the value it decodes to.
  int nearest_code(int i, float v) const;
  float value(int i, int code) const { return step[i] * static_cast<float>(code - zero) + offset[i]; }
};

// Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K.
bool has_block_grid(gguf::TensorType type);

// Grid of the block at `block` (one block of `type`). Precondition:
// has_block_grid(type).
void read_block_grid(gguf::TensorType type, const uint8_t* block, BlockGrid& grid);

// Stores codes[0..grid size) (each in [0, max_code]) into the block,
// keeping its scales. Precondition: has_block_grid(type).
void write_block_codes(gguf::TensorType type, uint8_t* block, const uint8_t* codes);

}  // namespace tokenmill::quant
