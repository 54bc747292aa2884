// The row loop of the integer decode kernels, shared by each ISA's row
// kernel (vec_dot_avx2.h, vec_dot_neon.cc): rows in order with the next
// ones prefetched, tokens in groups of up to 4 (the register budget of a
// row kernel), so a row is read from memory by the first group and from L1
// by the others.
//
// Internal linkage only: files compiled for different ISAs include it
// (dispatch.h explains why nothing here may be shared between them).
#pragma once

#include <cstdint>

#include "kernels/quantize_act.h"

namespace tokenmill::kernels {
namespace {  // NOLINT(build/namespaces): internal linkage on purpose

// Rows prefetched ahead of the one being multiplied.
constexpr int64_t kQ16PrefetchRows = 4;

// The activations of tokens [t0, ...) of a.
inline QuantizedActs acts_from_token(const QuantizedActs& a, int64_t t0) {
  const int64_t nb = a.cols / 32;
  return {a.qs + t0 * a.cols, a.d + t0 * nb, a.s32 + t0 * nb, a.s16 + 2 * t0 * nb, a.cols};
}

// Rows [r0, r1) of a matrix of `rows` rows of row_bytes bytes (`cols`
// weights) at `data`, times num_tokens (<= kMaxQ16RowTokens) tokens of a:
// y[t * rows + r]. kernel.template operator()<T>(row, cols, acts, y,
// y_stride) multiplies one row with T (1..4) tokens (a templated lambda).
template <class Kernel>
void walk_q16_rows(const uint8_t* data, int64_t row_bytes, int64_t rows, int64_t cols, int64_t r0, int64_t r1,
                   const QuantizedActs& a, int64_t num_tokens, float* y, const Kernel& kernel) {
  for (int64_t r = r0; r < r1; ++r) {
    const uint8_t* row = data + r * row_bytes;
    if (r + kQ16PrefetchRows < r1) {
      const uint8_t* ahead = row + kQ16PrefetchRows * row_bytes;
      for (int64_t off = 0; off < row_bytes; off += 64) __builtin_prefetch(ahead + off);
    }
    for (int64_t t0 = 0; t0 < num_tokens; t0 += 4) {
      const QuantizedActs at = acts_from_token(a, t0);
      float* yt = y + t0 * rows + r;
      switch (num_tokens - t0) {
        case 1: kernel.template operator()<1>(row, cols, at, yt, rows); break;
        case 2: kernel.template operator()<2>(row, cols, at, yt, rows); break;
        case 3: kernel.template operator()<3>(row, cols, at, yt, rows); break;
        default: kernel.template operator()<4>(row, cols, at, yt, rows); break;
      }
    }
  }
}

}  // namespace
}  // namespace tokenmill::kernels
