// Packed-panel GEMM (gemm.h). Every output of the AVX2 kernel is one FMA
// chain over the columns in order, so a scalar std::fma chain is an exact
// reference: results must match bit for bit, over row counts around the
// 16-row groups, column counts around the 8-column transpose and the
// 256-column chunks, 1..13, 25 and 64 tokens (the 6- and 12-token tiles and
// their tails), misaligned x and y, and a y stride wider than the panel; for
// the AVX2 and the AVX-512 kernel.
#include "kernels/gemm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "kernels/avx2/avx2.h"
#if !defined(TOKENMILL_NO_AVX512_KERNELS)
#include "kernels/avx512/avx512.h"
#endif
#include "kernels/cpu_features.h"
#include "kernels/test_util.h"

namespace tokenmill::kernels {
namespace {

struct AlignedFloats {
  explicit AlignedFloats(int64_t n)
      : data(static_cast<float*>(std::aligned_alloc(64, static_cast<size_t>((n * 4 + 63) / 64 * 64)))) {}
  ~AlignedFloats() { std::free(data); }
  float* data;
};

// Packs rows [0, num_rows) of w [num_rows, cols] as matmul does: kPackStep
// rows per call, zero rows up to the padded height.
void pack_panel(const std::vector<float>& w, int64_t num_rows, int64_t cols, float* packed) {
  const int64_t padded = (num_rows + kPackRows - 1) / kPackRows * kPackRows;
  for (int64_t i = 0; i < padded; i += kPackStep) {
    const int64_t n = std::max<int64_t>(0, std::min(kPackStep, num_rows - i));
    avx2::pack_rows(n > 0 ? w.data() + i * cols : nullptr, cols, n, cols, i, padded, packed);
  }
}

using GemmFn = void (*)(const float*, int64_t, int64_t, const float*, int64_t, int64_t, float*, int64_t);

void check_fma_chains(GemmFn gemm, const char* isa) {
  for (int64_t rows : {1, 7, 16, 17, 37}) {
    for (int64_t cols : {1, 7, 8, 19, 256, 300, 520}) {
      const auto w = testing::gaussian(rows * cols, static_cast<uint32_t>(rows * 1000 + cols));
      AlignedFloats packed(packed_panel_floats(rows, cols));
      pack_panel(w, rows, cols, packed.data);
      for (int64_t nt : {1, 2, 5, 6, 7, 11, 12, 13, 25, 64}) {
        const int off = static_cast<int>(nt % 5);  // misaligned x and y
        const int64_t y_stride = rows + 3;
        std::vector<float> xs(static_cast<size_t>(nt * cols + off));
        const auto xv = testing::gaussian(nt * cols, static_cast<uint32_t>(nt));
        std::copy(xv.begin(), xv.end(), xs.begin() + off);
        std::vector<float> ys(static_cast<size_t>(nt * y_stride + off), -1.0f);
        float* y = ys.data() + off;
        gemm(packed.data, rows, cols, xs.data() + off, cols, nt, y, y_stride);
        for (int64_t t = 0; t < nt; ++t) {
          for (int64_t r = 0; r < y_stride; ++r) {
            const std::string what = std::string(isa) + " rows " + std::to_string(rows) + " cols " +
                                     std::to_string(cols) + " tokens " + std::to_string(nt) + " r " +
                                     std::to_string(r) + " t " + std::to_string(t);
            if (r >= rows) {
              ASSERT_EQ(y[t * y_stride + r], -1.0f) << what << ": wrote outside the panel's rows";
              continue;
            }
            float want = 0.0f;
            for (int64_t k = 0; k < cols; ++k) want = std::fma(w[r * cols + k], xv[t * cols + k], want);
            ASSERT_EQ(y[t * y_stride + r], want) << what;
          }
        }
      }
    }
  }
}

TEST(GemmPacked, MatchesFmaChainBitForBit) {
  if (!cpu_features().supports_avx2_kernels()) GTEST_SKIP() << "no AVX2";
  check_fma_chains(avx2::gemm_packed, "avx2");
}

TEST(GemmPacked, Avx512MatchesFmaChainBitForBit) {
#if defined(TOKENMILL_NO_AVX512_KERNELS)
  GTEST_SKIP() << "this build has no AVX-512 kernels (TOKENMILL_AVX512_KERNELS=OFF)";
#else
  if (!cpu_features().supports_avx512_kernels()) GTEST_SKIP() << "no AVX-512 F/BW/VNNI on this CPU";
  check_fma_chains(avx512::gemm_packed, "avx512");
#endif
}

// Rows past the source are packed as zeros (so padded rows compute 0, never
// garbage or NaN), and the layout is the one gemm.h documents.
TEST(GemmPacked, PackLayoutAndZeroPadding) {
  if (!cpu_features().supports_avx2_kernels()) GTEST_SKIP() << "no AVX2";
  const int64_t rows = 3, cols = 260, padded = 16;
  std::vector<float> w(rows * cols);
  for (int64_t i = 0; i < rows * cols; ++i) w[i] = static_cast<float>(i + 1);
  AlignedFloats packed(packed_panel_floats(rows, cols));
  for (int64_t i = 0; i < padded * cols; ++i) packed.data[i] = std::nanf("");
  pack_panel(w, rows, cols, packed.data);
  for (int64_t k = 0; k < cols; ++k) {
    const int64_t k0 = k / kPackChunk * kPackChunk, kn = std::min(kPackChunk, cols - k0);
    for (int64_t r = 0; r < padded; ++r) {
      const float got = packed.data[k0 * padded + 0 * kn * 16 + (k - k0) * 16 + r];
      ASSERT_EQ(got, r < rows ? w[r * cols + k] : 0.0f) << "r " << r << " k " << k;
    }
  }
}

}  // namespace
}  // namespace tokenmill::kernels
