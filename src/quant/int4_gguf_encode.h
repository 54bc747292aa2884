// Int4Matrix (GPTQ/AWQ codes) -> GGUF legacy blocks, keeping the checkpoint's
// codes where a GGUF type holds them exactly. A 32-column block whose
// columns share one group has one scale s and one zero z per row, and
// s * (q - z) with q in 0..15, z in 0..16 is exactly
//   Q8_0: d = s, code q - z;   Q5_0: d = s, code q - z + 16;
//   Q4_0: d = s, code q, when z == 8 (symmetric GPTQ);
// and nearly Q4_1: d = s, m = -s * z rounded to fp16. Other blocks (act-order
// groups, groups not aligned to 32 columns, Q4_0 with z != 8) are
// dequantized and re-rounded with the reference quantizer (kernels/quant.h).
#pragma once

#include <cstdint>
#include <vector>

#include "gguf/tensor_type.h"
#include "quant/packed_int4_checkpoint.h"
#include "util/thread_pool.h"

namespace tokenmill::quant {

struct Int4EncodeStats {
  int64_t num_blocks = 0;
  int64_t requantized_blocks = 0;  // blocks that went through float
  double max_abs_error = 0.0;      // of the decoded blocks against value()
};

// Whether every 32-column block of m lies within one group (contiguous
// groups that are multiples of 32: no act-order permutation).
bool groups_align_to_blocks(const Int4Matrix& m);
// Whether every zero of m is 8 (GPTQ sym=True): Q4_0 is then exact.
bool all_zeros_are_eight(const Int4Matrix& m);

// The [m.rows, m.cols] matrix as `type` rows (row_bytes(type, cols) each);
// stats measure each decoded block against the checkpoint's values.
// Precondition: type is Q4_0, Q4_1, Q5_0 or Q8_0 and m.cols % 32 == 0
// (checked). Rows are split over the pool; the result does not depend on
// the thread count. Cost: O(rows * cols), one decode per block.
std::vector<uint8_t> encode_int4_matrix(const Int4Matrix& m, gguf::TensorType type, ThreadPool& pool,
                                        Int4EncodeStats& stats);

}  // namespace tokenmill::quant
