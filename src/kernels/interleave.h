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
//
// Q4_K x 16 layout (cols a multiple of 256): groups of 16 rows as above,
// the 256-column super-block s of group g at (g * (cols / 256) + s) * 2368:
//   bytes [512 k + 32 p, + 32) for k = 0..3, p = 0..15: byte 2 i + e is
//     byte 32 k + 2 p + e of row i's quants (low nibble: column 2 p + e of
//     sub-block 2 k; high: of sub-block 2 k + 1);
//   [2048, 2080): the rows' fp16 d; [2080, 2112): their fp16 dmin;
//   [2112 + 16 j, + 16): the rows' 6-bit scale of sub-block j (one byte
//     each); [2240 + 16 j, + 16): their 6-bit minimum of sub-block j.
// 64 bytes per 16 rows and super-block more than Q4_K (2.8 %): the packed
// 6-bit scales are stored unpacked.
//
// Q8_0 x 16 layout (cols a multiple of 32): groups of 16 rows as above, the
// 32-column block b of group g at (g * (cols / 32) + b) * 544:
//   bytes [32 p, 32 p + 32) for p = 0..15: byte 2 i + e is value 2 p + e of
//     row i's block (int8), so widening the 32 bytes to int16 gives column
//     pair p of all 16 rows interleaved;
//   bytes [512, 544): the 16 rows' fp16 scales d.
//
// Q5_0 x 16 layout (cols a multiple of 32): groups of 16 rows as above, the
// 32-column block b of group g at (g * (cols / 32) + b) * 352:
//   bytes [32 p, 32 p + 32) for p = 0..7: the nibbles as in Q4_0 x 16
//     (low: column 2 p + e, high: column 16 + 2 p + e of row i at byte
//     2 i + e);
//   bytes [256 + 32 s, + 32) for s = 0..1: byte 2 i + e holds the fifth
//     bits of row i for the pairs p = 4 s + k, k = 0..3: bit 2 k that of
//     column 2 p + e, bit 2 k + 1 that of column 16 + 2 p + e, so that
//     shifting the widened segment right by 2 k and masking bit 4 after a
//     left shift of 4 (or 3) places a pair's fifth bit beside its nibble;
//   bytes [320, 352): the 16 rows' fp16 scales d.
// The same bytes as the 16 Q5_0 rows (22 bytes per row and block), only
// reordered.
//
// Q6_K x 16 layout (cols a multiple of 256): groups of 16 rows, the
// super-block s of group g at (g * (cols / 256) + s) * 3360; inside it the
// 32-column block j at + 384 j, with the 6-bit values q (0..63, x = d *
// scale * (q - 32)) of its column pair p (columns 2 p, 2 p + 1) split so
// that one 32-byte segment widened to int16 gives two pairs' low 4 bits
// and one gives four pairs' high 2 bits, as in Q4_0 x 16:
//   bytes [32 p, + 32) for p = 0..7: byte 2 i + e holds the low 4 bits of
//     row i's column 2 p + e (low nibble) and 16 + 2 p + e (high nibble);
//   bytes [256 + 32 s, + 32) for s = 0..3: byte 2 i + e holds the high 2
//     bits of row i's columns 4 s + e (bits 0-1), 16 + 4 s + e (bits 2-3),
//     4 s + 2 + e (bits 4-5) and 18 + 4 s + e (bits 6-7).
// Then [3072 + 16 h, + 16): the rows' int8 scale of 16-column sub-block
// h = 0..15; [3328, 3360): their fp16 d. The same bytes as the 16 Q6_K
// rows, only reordered.
#pragma once

#include <cstdint>

#include "kernels/matmul.h"

namespace tokenmill::kernels {

inline constexpr int64_t kInterleaveRows = 16;
inline constexpr int64_t kQ4_0x16BlockBytes = 288;
inline constexpr int64_t kQ4_Kx16BlockBytes = 2368;
inline constexpr int64_t kQ8_0x16BlockBytes = 544;
inline constexpr int64_t kQ5_0x16BlockBytes = 352;
inline constexpr int64_t kQ5_0x16HighBits = 256;  // offset of the fifth bits, then the fp16 d at 320
inline constexpr int64_t kQ4_Kx16Scales = 2048;   // offset of the d, dmin, scales, minimums
inline constexpr int64_t kQ6_Kx16BlockBytes = 3360;
inline constexpr int64_t kQ6_Kx16Scales = 3072;  // offset of the int8 scales, then the fp16 d

// Whether interleave_weights has a layout for this type (the tables give a
// gemm_interleaved kernel to these types only).
bool has_interleaved_layout(gguf::TensorType type);
// Bytes of the interleaved copy of w. Precondition: has_interleaved_layout(w.type).
int64_t interleaved_bytes(const WeightView& w);
// Writes the interleaved copy of w (data, rows, cols) to dst
// (interleaved_bytes(w) bytes, 32-byte aligned). Portable code: runs once at
// load.
void interleave_weights(const WeightView& w, uint8_t* dst);

}  // namespace tokenmill::kernels
