// The tile walks of the packed-panel GEMMs (gemm.h), shared by their AVX2
// and AVX-512 micro-kernels (gemm_avx2.cc, gemm_avx512.cc for FP32;
// gemm_q16_avx2.cc, gemm_q16_avx512.cc for int16): for each 256-column
// chunk, each 16-row group and each tile of up to kTokens tokens, where the
// micro-kernel reads and writes. Included only by those *_avx2.cc /
// *_avx512.cc files; internal linkage (see dispatch.h).
#pragma once

#include <cstdint>

#include "kernels/gemm.h"

namespace tokenmill::kernels {
namespace {  // NOLINT(build/namespaces): internal linkage on purpose

// Where a micro-kernel call reads: the group's weights for the chunk, its
// per-half scales and biases ([half][panel rows], at the chunk's first half
// and the group's first row), and token 0's activations at the chunk.
struct Q16MicroArgs {
  const int16_t* w;
  const float* scale;
  const float* bias;
  int64_t panel_rows;
  int64_t num_blocks;
  const int16_t* q;  // token t: q + t * q_stride
  int64_t q_stride;
  const float* d;  // token t, block b: d[t * act_blocks + b]
  const float* s32;
  const float* s16;  // token t, half h: s16[t * 2 * act_blocks + h]
  int64_t act_blocks;
  float* y;
  int64_t y_stride;
  int64_t valid;
};

// Calls micro(args, tokens, first_chunk, partial_group) over every tile of
// the panel product (gemm_q16_packed's contract).
template <int64_t kTokens, class Micro>
inline void for_each_q16_tile(const int16_t* packed_q, const float* packed_scale, const float* packed_bias,
                              int64_t num_rows, int64_t cols, const QuantizedActs& a, int64_t num_tokens, float* y,
                              int64_t y_stride, const Micro& micro) {
  const int64_t panel_rows = (num_rows + kPackRows - 1) / kPackRows * kPackRows;
  const int64_t act_blocks = cols / 32;
  for (int64_t k0 = 0; k0 < cols; k0 += kPackChunk) {
    const int64_t kn = cols - k0 < kPackChunk ? cols - k0 : kPackChunk;
    for (int64_t g = 0; g * kPackRows < num_rows; ++g) {
      const int64_t valid = num_rows - g * kPackRows < kPackRows ? num_rows - g * kPackRows : kPackRows;
      for (int64_t t0 = 0; t0 < num_tokens; t0 += kTokens) {
        const int64_t nt = num_tokens - t0 < kTokens ? num_tokens - t0 : kTokens;
        const Q16MicroArgs m{packed_q + k0 * panel_rows + g * kn * kPackRows,
                             packed_scale + (k0 / 16) * panel_rows + g * kPackRows,
                             packed_bias + (k0 / 16) * panel_rows + g * kPackRows,
                             panel_rows,
                             kn / 32,
                             a.qs + t0 * cols + k0,
                             cols,
                             a.d + t0 * act_blocks + k0 / 32,
                             a.s32 + t0 * act_blocks + k0 / 32,
                             a.s16 + t0 * 2 * act_blocks + k0 / 16,
                             act_blocks,
                             y + t0 * y_stride + g * kPackRows,
                             y_stride,
                             valid};
        micro(m, nt, k0 == 0, valid < kPackRows);
      }
    }
  }
}

// Calls micro(panel_chunk, kn, x_tile, y_tile, valid, tokens, first_chunk,
// partial_group) over every tile of the FP32 panel product (gemm_packed's
// contract).
template <int64_t kTokens, class Micro>
inline void for_each_f32_tile(const float* packed, int64_t num_rows, int64_t cols, const float* x, int64_t x_stride,
                              int64_t num_tokens, float* y, int64_t y_stride, const Micro& micro) {
  const int64_t panel_rows = (num_rows + kPackRows - 1) / kPackRows * kPackRows;
  for (int64_t k0 = 0; k0 < cols; k0 += kPackChunk) {
    const int64_t kn = cols - k0 < kPackChunk ? cols - k0 : kPackChunk;
    for (int64_t g = 0; g * kPackRows < num_rows; ++g) {
      const float* wp = packed + k0 * panel_rows + g * kn * kPackRows;
      const int64_t valid = num_rows - g * kPackRows < kPackRows ? num_rows - g * kPackRows : kPackRows;
      for (int64_t t0 = 0; t0 < num_tokens; t0 += kTokens) {
        const int64_t nt = num_tokens - t0 < kTokens ? num_tokens - t0 : kTokens;
        micro(wp, kn, x + t0 * x_stride + k0, y + t0 * y_stride + g * kPackRows, valid, nt, k0 == 0, valid < kPackRows);
      }
    }
  }
}

}  // namespace
}  // namespace tokenmill::kernels
