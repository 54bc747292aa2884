// Weights repacked at load time into a row-interleaved layout, for kernels
// that multiply 16 rows at once without per-call packing (decode, batched
// decode and prefill alike). The file on disk is unchanged: the model keeps
// its WeightView on the mapped file (hooks, embedding lookups and the other
// kernel tables read that) and adds the interleaved copy, which matmul uses
// when the active kernel table has a kernel for it.
//
// Q4_0 x 16 layout, for a matrix of `rows` rows and `cols` columns (a
// multiple of 32): rows in groups of 16 (the last one padded with zero rows
// of scale 0), group g at g * (cols / 32) * 288 bytes; inside a group, the
// 32-column block b at + b * 288:
//   bytes [32 p, 32 p + 32) for p = 0..7: byte 2 i + e is byte 2 p + e of
//     row i's Q4_0 block (its low nibble is column 2 p + e, the high one
//     column 16 + 2 p + e), so widening the 32 bytes to int16 and masking
//     gives column pair (2 p, 2 p + 1) of all 16 rows interleaved, and
//     shifting by 4 gives pair (16 + 2 p, 17 + 2 p);
//   bytes [256, 288): the 16 rows' fp16 scales d.
// The same bytes as the 16 Q4_0 rows (18 bytes per row and block), only
// reordered.
#pragma once

#include <cstdint>

#include "kernels/matmul.h"

namespace tokenmill::kernels {

inline constexpr int64_t kInterleaveRows = 16;
inline constexpr int64_t kQ4_0x16BlockBytes = 288;

// Whether interleave_weights handles this type.
bool interleave_supported(gguf::TensorType type);
// Bytes of the interleaved copy of w. Precondition: interleave_supported(w.type).
int64_t interleaved_bytes(const WeightView& w);
// Writes the interleaved copy of w (data, rows, cols) to dst
// (interleaved_bytes(w) bytes, 32-byte aligned). Portable code: runs once at
// load.
void interleave_weights(const WeightView& w, uint8_t* dst);

}  // namespace tokenmill::kernels
