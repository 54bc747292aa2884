// W8A8: the per-token activation quantizer by hand, then the integer-dot
// product (AVX2 and scalar) against an exact double computation of the same
// integer formula, and against the float product within the bound that
// 8-bit activations allow.
#include "kernels/w8a8.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/quant.h"
#include "kernels/quant_blocks.h"
#include "util/fp16.h"

namespace tokenmill::kernels {
namespace {

TEST(W8A8, PerTokenActivationQuantization) {
  const std::vector<float> x = {1.0f, -2.54f, 0.011f, 0.0f, /* token 2 */ 0.0f, 0.0f, 0.0f, 0.0f};
  std::vector<int8_t> q(8);
  std::vector<float> s(2);
  quantize_activations_q8(x.data(), 2, 4, q.data(), s.data());
  EXPECT_FLOAT_EQ(s[0], 2.54f / 127.0f);
  EXPECT_EQ(q[0], 50);  // 1 / 0.02 = 50
  EXPECT_EQ(q[1], -127);
  EXPECT_EQ(q[2], 1);  // 0.55 rounds up
  EXPECT_EQ(q[3], 0);
  EXPECT_EQ(s[1], 0.0f);
  for (int i = 4; i < 8; ++i) EXPECT_EQ(q[i], 0);
}

TEST(W8A8, MatmulMatchesIntegerFormulaAndFloatProduct) {
  ThreadPool pool(2);
  std::mt19937 rng(4);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (int64_t num_tokens : {1, 2, 4, 5, 9}) {
    const int64_t rows = 11, cols = 128;
    std::vector<float> w(rows * cols), x(num_tokens * cols);
    for (float& v : w) v = dist(rng) * 0.05f;
    for (float& v : x) v = dist(rng);
    x[5] = 9.0f;  // an outlier channel
    const int64_t row_bytes = gguf::row_bytes(gguf::TensorType::Q8_0, cols);
    std::vector<uint8_t> wq(rows * row_bytes);
    for (int64_t r = 0; r < rows; ++r)
      quantize_row_ref(gguf::TensorType::Q8_0, w.data() + r * cols, wq.data() + r * row_bytes, cols);
    const WeightView view{gguf::TensorType::Q8_0, wq.data(), rows, cols};
    std::vector<int8_t> qx(num_tokens * cols);
    std::vector<float> sx(num_tokens);
    quantize_activations_q8(x.data(), num_tokens, cols, qx.data(), sx.data());
    std::vector<float> y(num_tokens * rows), yref(num_tokens * rows);
    matmul_w8a8(view, x.data(), num_tokens, y.data(), pool);
    matmul_w8a8_ref(view, x.data(), num_tokens, yref.data());
    for (int64_t t = 0; t < num_tokens; ++t) {
      for (int64_t r = 0; r < rows; ++r) {
        const auto* blocks = reinterpret_cast<const BlockQ8_0*>(wq.data() + r * row_bytes);
        double exact = 0, mag = 0, fp = 0, wabs = 0;
        for (int64_t b = 0; b < cols / 32; ++b) {
          int64_t dot = 0;
          for (int i = 0; i < 32; ++i) {
            dot += int64_t{blocks[b].qs[i]} * qx[t * cols + b * 32 + i];
            wabs += std::fabs(fp16_to_fp32(blocks[b].d) * blocks[b].qs[i]);
          }
          exact += double(fp16_to_fp32(blocks[b].d)) * double(dot);
          mag += std::fabs(double(fp16_to_fp32(blocks[b].d)) * double(dot));
        }
        exact *= sx[t];
        const double tol = mag * sx[t] * (cols / 32 + 4) * std::ldexp(1.0, -24);
        EXPECT_NEAR(y[t * rows + r], exact, tol);
        EXPECT_NEAR(yref[t * rows + r], exact, tol);
        // Against the float product with the dequantized weights: each
        // activation moves by at most half a step sx / 2.
        std::vector<float> wd(cols);
        dequantize_row_ref(gguf::TensorType::Q8_0, wq.data() + r * row_bytes, wd.data(), cols);
        for (int64_t c = 0; c < cols; ++c) fp += double(wd[c]) * x[t * cols + c];
        EXPECT_NEAR(y[t * rows + r], fp, wabs * sx[t] * 0.5 + 1e-5);
      }
    }
  }
}

}  // namespace
}  // namespace tokenmill::kernels
