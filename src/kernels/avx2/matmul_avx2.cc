// AVX2 dense pieces of matmul: the FP32 register-tiled panel product, and
// decode-time dot products straight from F32/F16/BF16 rows. Quantized types
// are in matmul_quant_avx2.cc.
#include <immintrin.h>
#include <string.h>

#include "kernels/avx2/avx2.h"
#include "kernels/avx2/math_avx2.h"
#include "kernels/decoder_for.h"

namespace tokenmill::kernels::avx2 {
namespace {

using gguf::TensorType;

// y[t * ys + r] = w[r] . x[t] for an R x T tile. R*T accumulators + T x
// vectors + one w vector fit the 16 YMM registers at 4 x 3: each step loads
// 7 vectors for 12 FMAs. Every output is one accumulator over 8-column steps,
// a zero-padded masked tail step, then hsum: the same sequence for every tile
// shape, so results do not depend on the tiling.
template <int R, int T>
void tile(const float* w, int64_t ws, const float* x, int64_t xs, int64_t cols, float* y, int64_t ys) {
  __m256 acc[R][T];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 3
    for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
  }
  int64_t c = 0;
  for (; c + 8 <= cols; c += 8) {
    __m256 xv[T];
#pragma GCC unroll 3
    for (int t = 0; t < T; ++t) xv[t] = _mm256_loadu_ps(x + t * xs + c);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const __m256 wv = _mm256_loadu_ps(w + r * ws + c);
#pragma GCC unroll 3
      for (int t = 0; t < T; ++t) acc[r][t] = _mm256_fmadd_ps(wv, xv[t], acc[r][t]);
    }
  }
  if (c < cols) {
    const __m256i m = tail_mask(cols - c);
    for (int r = 0; r < R; ++r) {
      const __m256 wv = _mm256_maskload_ps(w + r * ws + c, m);
      for (int t = 0; t < T; ++t) {
        acc[r][t] = _mm256_fmadd_ps(wv, _mm256_maskload_ps(x + t * xs + c, m), acc[r][t]);
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int t = 0; t < T; ++t) y[t * ys + r] = hsum(acc[r][t]);
  }
}

using TileFn = void (*)(const float*, int64_t, const float*, int64_t, int64_t, float*, int64_t);
constexpr int kTileRows = 4;
constexpr int kTileTokens = 3;
constexpr TileFn kTiles[kTileRows][kTileTokens] = {
    {tile<1, 1>, tile<1, 2>, tile<1, 3>},
    {tile<2, 1>, tile<2, 2>, tile<2, 3>},
    {tile<3, 1>, tile<3, 2>, tile<3, 3>},
    {tile<4, 1>, tile<4, 2>, tile<4, 3>},
};

// Row loaders for the dense types: 8 elements at i, or the first `count` < 8
// (zero-padded). Indices are in elements.
struct F32Row {
  static constexpr TensorType kType = TensorType::F32;
  static constexpr int64_t kElemBytes = 4;
  static __m256 load(const void* p, int64_t i) { return _mm256_loadu_ps(static_cast<const float*>(p) + i); }
  static __m256 load_part(const void* p, int64_t i, int64_t count) {
    return _mm256_maskload_ps(static_cast<const float*>(p) + i, tail_mask(count));
  }
};

struct F16Row {
  static constexpr TensorType kType = TensorType::F16;
  static constexpr int64_t kElemBytes = 2;
  static __m256 load(const void* p, int64_t i) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(p) + i)));
  }
  static __m256 load_part(const void* p, int64_t i, int64_t count) {
    uint16_t tmp[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    memcpy(tmp, static_cast<const uint16_t*>(p) + i, static_cast<size_t>(count) * 2);
    return load(tmp, 0);
  }
};

struct BF16Row {
  static constexpr TensorType kType = TensorType::BF16;
  static constexpr int64_t kElemBytes = 2;
  static __m256 load(const void* p, int64_t i) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(p) + i));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
  static __m256 load_part(const void* p, int64_t i, int64_t count) {
    uint16_t tmp[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    memcpy(tmp, static_cast<const uint16_t*>(p) + i, static_cast<size_t>(count) * 2);
    return load(tmp, 0);
  }
};

// y[t * ys] = row . x[t] for T <= 4 tokens, with A independent accumulators
// per token to hide FMA latency while staying within 16 registers.
template <class L, int T>
void dense_row(const void* row, int64_t cols, const float* x, int64_t xs, float* y, int64_t ys) {
  constexpr int A = T <= 2 ? 4 : 2;
  __m256 acc[T][A];
  for (int t = 0; t < T; ++t) {
    for (int a = 0; a < A; ++a) acc[t][a] = _mm256_setzero_ps();
  }
  int64_t c = 0;
  for (; c + 8 * A <= cols; c += 8 * A) {
#pragma GCC unroll 4
    for (int a = 0; a < A; ++a) {
      const __m256 wv = L::load(row, c + 8 * a);
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        acc[t][a] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x + t * xs + c + 8 * a), acc[t][a]);
      }
    }
  }
  for (; c < cols; c += 8) {
    const int64_t count = cols - c < 8 ? cols - c : 8;
    const __m256 wv = count == 8 ? L::load(row, c) : L::load_part(row, c, count);
    const __m256i m = tail_mask(count);
    for (int t = 0; t < T; ++t) {
      acc[t][0] = _mm256_fmadd_ps(wv, _mm256_maskload_ps(x + t * xs + c, m), acc[t][0]);
    }
  }
  for (int t = 0; t < T; ++t) {
    __m256 s = acc[t][0];
    for (int a = 1; a < A; ++a) s = _mm256_add_ps(s, acc[t][a]);
    y[t * ys] = hsum(s);
  }
}

template <class L, int T>
void dense_rows(const WeightView& w, int64_t elem_bytes, int64_t r0, int64_t r1, const float* x, float* y) {
  const auto* base = static_cast<const uint8_t*>(w.data);
  for (int64_t r = r0; r < r1; ++r) dense_row<L, T>(base + r * w.cols * elem_bytes, w.cols, x, w.cols, y + r, w.rows);
}

template <class L>
void dense_rows_any(const WeightView& w, int64_t r0, int64_t r1, const float* x, int64_t num_tokens, float* y) {
  switch (num_tokens) {
    case 1: return dense_rows<L, 1>(w, L::kElemBytes, r0, r1, x, y);
    case 2: return dense_rows<L, 2>(w, L::kElemBytes, r0, r1, x, y);
    case 3: return dense_rows<L, 3>(w, L::kElemBytes, r0, r1, x, y);
    default: return dense_rows<L, 4>(w, L::kElemBytes, r0, r1, x, y);
  }
}

template <class L>
void convert_row(const void* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, L::load(src, i));
  if (i < n) _mm256_maskstore_ps(dst + i, tail_mask(n - i), L::load_part(src, i, n - i));
}

}  // namespace

void gemm_f32(const float* w, int64_t w_stride, int64_t num_rows, const float* x, int64_t x_stride, int64_t num_tokens,
              int64_t cols, float* y, int64_t y_stride) {
  for (int64_t r = 0; r < num_rows; r += kTileRows) {
    const int64_t nr = num_rows - r < kTileRows ? num_rows - r : kTileRows;
    for (int64_t t = 0; t < num_tokens; t += kTileTokens) {
      const int64_t nt = num_tokens - t < kTileTokens ? num_tokens - t : kTileTokens;
      kTiles[nr - 1][nt - 1](w + r * w_stride, w_stride, x + t * x_stride, x_stride, cols, y + t * y_stride + r,
                             y_stride);
    }
  }
}

template <TensorType T>
constinit const TypeKernels::DequantizeRow FloatRowKernels<T>::dequantize_row =
    convert_row<DecoderFor<T, F32Row, F16Row, BF16Row>>;
template <TensorType T>
constinit const TypeKernels::FusedRows FloatRowKernels<T>::fused_rows =
    dense_rows_any<DecoderFor<T, F32Row, F16Row, BF16Row>>;

template struct FloatRowKernels<TensorType::F32>;
template struct FloatRowKernels<TensorType::F16>;
template struct FloatRowKernels<TensorType::BF16>;

}  // namespace tokenmill::kernels::avx2
