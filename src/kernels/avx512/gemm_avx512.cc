// AVX-512 version of the packed-panel FP32 GEMM micro-kernel (gemm.h,
// gemm_avx2.cc): the same panel layout, 16 rows of a column in one 512-bit
// vector, and 12 tokens per tile (12 accumulators keep the two FMA pipes
// busy across the FMA latency). Every output is still one FMA chain over
// the columns in order, so results equal the AVX2 kernel's bit for bit.
#include <immintrin.h>

#include "kernels/avx512/avx512.h"
#include "kernels/avx512/math_avx512.h"
#include "kernels/gemm.h"
#include "kernels/x86/gemm_tiles.h"

namespace tokenmill::kernels::avx512 {
namespace {

constexpr int kTokens = 12;

template <int T, bool kFirst, bool kPartial>
void micro(const float* wp, int64_t kn, const float* x, int64_t xs, float* y, int64_t ys, int64_t valid) {
  const __mmask16 mask = row_mask(valid);
  __m512 acc[T];
  load_tile<T, kFirst, kPartial>(y, ys, mask, acc);
  for (int64_t j = 0; j < kn; ++j) {
    const __m512 w = _mm512_load_ps(wp + 16 * j);
#pragma GCC unroll 12
    for (int t = 0; t < T; ++t) acc[t] = _mm512_fmadd_ps(w, _mm512_set1_ps(x[t * xs + j]), acc[t]);
  }
  store_tile<T, kPartial>(y, ys, mask, acc);
}

using MicroFn = void (*)(const float*, int64_t, const float*, int64_t, float*, int64_t, int64_t);

template <bool kFirst, bool kPartial>
constexpr MicroFn kMicro[kTokens] = {
    micro<1, kFirst, kPartial>, micro<2, kFirst, kPartial>,  micro<3, kFirst, kPartial>,  micro<4, kFirst, kPartial>,
    micro<5, kFirst, kPartial>, micro<6, kFirst, kPartial>,  micro<7, kFirst, kPartial>,  micro<8, kFirst, kPartial>,
    micro<9, kFirst, kPartial>, micro<10, kFirst, kPartial>, micro<11, kFirst, kPartial>, micro<12, kFirst, kPartial>};

MicroFn micro_for(int64_t tokens, bool first, bool partial) {
  if (first) return partial ? kMicro<true, true>[tokens - 1] : kMicro<true, false>[tokens - 1];
  return partial ? kMicro<false, true>[tokens - 1] : kMicro<false, false>[tokens - 1];
}

}  // namespace

void gemm_packed(const float* packed, int64_t num_rows, int64_t cols, const float* x, int64_t x_stride,
                 int64_t num_tokens, float* y, int64_t y_stride) {
  for_each_f32_tile<kTokens>(
      packed, num_rows, cols, x, x_stride, num_tokens, y, y_stride,
      [&](const float* wp, int64_t kn, const float* xt, float* yt, int64_t valid, int64_t nt, bool first,
          bool partial) { micro_for(nt, first, partial)(wp, kn, xt, x_stride, yt, y_stride, valid); });
}

}  // namespace tokenmill::kernels::avx512
