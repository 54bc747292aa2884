// FP8 E4M3 conversions against a brute-force nearest-value search over all
// 256 codes (independent of the bit tricks in fp8.cc), block scaling, and
// the FP8 matmul (AVX2 and scalar) against a double-precision product of
// the dequantized weights.
#include "kernels/fp8.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "util/fp16.h"

namespace tokenmill::kernels {
namespace {

// Value of a code from the definition: (-1)^s 2^(e-7) (1 + m/8), subnormal 2^-6 m/8.
double by_definition(int code) {
  const int s = code >> 7, e = (code >> 3) & 15, m = code & 7;
  const double mag = e == 0 ? std::ldexp(m / 8.0, -6) : std::ldexp(1.0 + m / 8.0, e - 7);
  return s ? -mag : mag;
}

// Nearest finite code by exhaustive search, ties to the even code; beyond
// 448 saturates.
uint8_t brute_force(float f) {
  int best = -1;
  double best_err = 0;
  for (int c = 0; c < 256; ++c) {
    if ((c & 0x7F) == 0x7F) continue;  // NaN
    if ((c >> 7) != (std::signbit(f) ? 1 : 0)) continue;
    const double err = std::fabs(by_definition(c) - f);
    if (best < 0 || err < best_err || (err == best_err && (c & 1) == 0)) best = c, best_err = err;
  }
  return static_cast<uint8_t>(best);
}

TEST(Fp8, DecodeMatchesDefinitionForEveryCode) {
  for (int c = 0; c < 256; ++c) {
    if ((c & 0x7F) == 0x7F) {
      EXPECT_TRUE(std::isnan(fp8_e4m3_to_fp32(static_cast<uint8_t>(c))));
      continue;
    }
    EXPECT_EQ(fp8_e4m3_to_fp32(static_cast<uint8_t>(c)), by_definition(c)) << c;
    EXPECT_EQ(fp32_to_fp8_e4m3(fp8_e4m3_to_fp32(static_cast<uint8_t>(c))), c) << c;  // exact values round-trip
  }
  EXPECT_EQ(fp8_e4m3_to_fp32(0x7E), 448.0f);
  EXPECT_EQ(fp8_e4m3_to_fp32(0x01), std::ldexp(1.0f, -9));
}

TEST(Fp8, EncodeRoundsToNearestEvenAndSaturates) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> exp_dist(-14.0f, 10.0f);
  for (int i = 0; i < 20000; ++i) {
    const float f = std::exp2(exp_dist(rng)) * (i % 2 ? -1.0f : 1.0f);
    ASSERT_EQ(fp32_to_fp8_e4m3(f), brute_force(f)) << f;
  }
  // Midpoints between neighbours: ties go to the even code.
  for (int c = 0; c < 0x7E; ++c) {
    const float mid = static_cast<float>((by_definition(c) + by_definition(c + 1)) / 2);
    EXPECT_EQ(fp32_to_fp8_e4m3(mid), (c & 1) ? c + 1 : c) << c;
  }
  EXPECT_EQ(fp32_to_fp8_e4m3(1e6f), 0x7E);
  EXPECT_EQ(fp32_to_fp8_e4m3(-500.0f), 0xFE);
  EXPECT_EQ(fp32_to_fp8_e4m3(std::nanf("")), 0x7F);
  EXPECT_EQ(fp32_to_fp8_e4m3(0.0f), 0x00);
  EXPECT_EQ(fp32_to_fp8_e4m3(-0.0f), 0x80);
}

TEST(Fp8, BlockExponentAndRoundTripErrorBound) {
  EXPECT_EQ(fp8_block_exponent(448.0f), 0);
  EXPECT_EQ(fp8_block_exponent(449.0f), 1);
  EXPECT_EQ(fp8_block_exponent(224.0f), -1);
  EXPECT_EQ(fp8_block_exponent(0.0f), 0);
  std::mt19937 rng(5);
  std::normal_distribution<float> dist(0.0f, 0.05f);
  std::vector<float> x(256), y(256);
  for (float& v : x) v = dist(rng);
  x[7] = 0.0f;
  round_row_to_fp8(x.data(), y.data(), 256);
  for (int b = 0; b < 8; ++b) {
    float amax = 0;
    for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[b * 32 + i]));
    const float step = std::ldexp(1.0f, fp8_block_exponent(amax));  // value of one unit before scaling
    for (int i = 0; i < 32; ++i) {
      const float a = x[b * 32 + i], r = y[b * 32 + i];
      // Half an ulp of a 3-bit mantissa (2^-4 relative) for normals, half the
      // subnormal step 2^-10 * scale below 2^-6 * scale.
      EXPECT_LE(std::fabs(a - r), std::max(std::fabs(a) / 16.0f, std::ldexp(step, -10)) * 1.0001f) << a;
      // Exactly representable in BF16 (what the GGUF file stores).
      EXPECT_EQ(bf16_to_fp32(fp32_to_bf16(r)), r);
    }
  }
  EXPECT_EQ(y[7], 0.0f);
}

TEST(Fp8, MatmulMatchesDequantizedProduct) {
  ThreadPool pool(2);
  std::mt19937 rng(9);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (int64_t num_tokens : {1, 3, 4, 6}) {
    const int64_t rows = 13, cols = 96;
    std::vector<float> w(rows * cols), x(num_tokens * cols);
    for (float& v : w) v = dist(rng) * 0.1f;
    for (float& v : x) v = dist(rng);
    std::vector<Fp8Block> blocks(rows * cols / 32);
    for (int64_t r = 0; r < rows; ++r) quantize_row_fp8(w.data() + r * cols, blocks.data() + r * cols / 32, cols);
    std::vector<float> wd(rows * cols);
    for (int64_t r = 0; r < rows; ++r) dequantize_row_fp8(blocks.data() + r * cols / 32, wd.data() + r * cols, cols);
    const Fp8Matrix m{blocks.data(), rows, cols};
    std::vector<float> y(num_tokens * rows), yref(num_tokens * rows);
    matmul_fp8(m, x.data(), num_tokens, y.data(), pool);
    matmul_fp8_ref(m, x.data(), num_tokens, yref.data());
    for (int64_t t = 0; t < num_tokens; ++t) {
      for (int64_t r = 0; r < rows; ++r) {
        double want = 0, mag = 0;
        for (int64_t c = 0; c < cols; ++c) {
          want += double(wd[r * cols + c]) * x[t * cols + c];
          mag += std::fabs(double(wd[r * cols + c]) * x[t * cols + c]);
        }
        const double tol = mag * (cols + 4) * std::ldexp(1.0, -24);  // float accumulation
        EXPECT_NEAR(y[t * rows + r], want, tol);
        EXPECT_NEAR(yref[t * rows + r], want, tol);
      }
    }
  }
}

}  // namespace
}  // namespace tokenmill::kernels
