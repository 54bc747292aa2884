// GPTQ, AWQ and the block grids they round on: grids read back from blocks
// of every type reproduce the blocks; on synthetic layers with known input
// Hessians GPTQ's output error is below plain rounding and below
// importance-weighted rounding, and AWQ's is never above plain rounding.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/quant.h"
#include "quant/awq.h"
#include "quant/block_grid.h"
#include "quant/calibrated_quant.h"
#include "quant/gptq.h"
#include "quant/importance_quant.h"
#include "quant/input_hessian.h"
#include "quant/synthetic_layer_test_util.h"

namespace tokenmill::quant {
namespace {

using gguf::TensorType;
using synthetic_layer::Layer;
using synthetic_layer::make_layer;
using synthetic_layer::output_error;
using synthetic_layer::quantize_rows;
using synthetic_layer::synthetic_inputs;

constexpr TensorType kGridTypes[] = {TensorType::Q4_0, TensorType::Q4_1, TensorType::Q5_0, TensorType::Q5_1,
                                     TensorType::Q8_0, TensorType::Q2_K, TensorType::Q3_K, TensorType::Q4_K,
                                     TensorType::Q5_K, TensorType::Q6_K};

// Every element's decoded value lies on the grid read from its block, and
// writing the codes of those values back gives the block's bytes.
TEST(BlockGrid, ReproducesEveryTypesBlocks) {
  std::mt19937 rng(5);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  const int64_t n = 512;
  std::vector<float> x(n), y(n);
  for (float& v : x) v = dist(rng) * (1.0f + 3.0f * (dist(rng) > 2.0f));
  for (TensorType type : kGridTypes) {
    ASSERT_TRUE(has_block_grid(type));
    std::vector<uint8_t> q(gguf::row_bytes(type, n));
    kernels::quantize_row_ref(type, x.data(), q.data(), n);
    kernels::dequantize_row_ref(type, q.data(), y.data(), n);
    const int64_t block_bytes = gguf::tensor_type_info(type).bytes_per_block;
    const int bs = static_cast<int>(gguf::tensor_type_info(type).block_size);
    std::vector<uint8_t> rewritten = q;
    for (int64_t b = 0; b < n / bs; ++b) {
      BlockGrid g;
      read_block_grid(type, q.data() + b * block_bytes, g);
      ASSERT_EQ(g.size, bs);
      std::vector<uint8_t> codes(bs);
      for (int i = 0; i < bs; ++i) {
        const float v = y[b * bs + i];
        const int c = g.nearest_code(i, v);
        codes[i] = static_cast<uint8_t>(c);
        ASSERT_NEAR(g.value(i, c), v, 1e-5f * (1.0f + std::fabs(v))) << gguf::tensor_type_name(type) << " " << i;
      }
      // Scrambled codes first, so that the write must set every bit.
      std::vector<uint8_t> junk(bs, static_cast<uint8_t>(g.max_code));
      write_block_codes(type, rewritten.data() + b * block_bytes, junk.data());
      write_block_codes(type, rewritten.data() + b * block_bytes, codes.data());
    }
    std::vector<float> z(n);
    kernels::dequantize_row_ref(type, rewritten.data(), z.data(), n);
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(z[i], y[i]) << gguf::tensor_type_name(type) << " element " << i;
  }
  EXPECT_FALSE(has_block_grid(TensorType::F16));
  EXPECT_FALSE(has_block_grid(TensorType::BF16));
}

TEST(Gptq, FactorInvertsTheDampedHessian) {
  ThreadPool pool(2);
  Layer l = make_layer(3, pool);
  std::vector<double> h = l.hessian.mean_full();
  const GptqFactor f = gptq_factor(h, l.cols, 0.01, pool);
  double mean_diag = 0.0;
  for (int64_t i = 0; i < l.cols; ++i) mean_diag += h[i * l.cols + i] / l.cols;
  for (int64_t i = 0; i < l.cols; ++i) h[i * l.cols + i] += 0.01 * mean_diag;
  // (U^T U) H = I
  const int64_t n = l.cols;
  for (int64_t i = 0; i < n; i += 37) {
    for (int64_t j = 0; j < n; j += 11) {
      double s = 0.0;
      for (int64_t k = 0; k < n; ++k) {
        double uu = 0.0;  // (U^T U)[i, k]
        for (int64_t m = 0; m <= std::min(i, k); ++m) uu += double(f.u[m * n + i]) * f.u[m * n + k];
        s += uu * h[k * n + j];
      }
      ASSERT_NEAR(s, i == j ? 1.0 : 0.0, 2e-3) << i << "," << j;
    }
    for (int64_t j = 0; j < i; ++j) ASSERT_EQ(f.u[i * n + j], 0.0f);  // upper triangular
  }
}

TEST(Gptq, OutputErrorBelowPlainAndWeightedRounding) {
  ThreadPool pool(2);
  const Layer l = make_layer(7, pool);
  const std::vector<double> h = l.hessian.mean_full();
  const std::vector<float> importance = l.hessian.mean_sq();
  const GptqFactor f = gptq_factor(h, l.cols, 0.01, pool);
  for (TensorType type : {TensorType::Q4_0, TensorType::Q4_1, TensorType::Q5_0, TensorType::Q8_0, TensorType::Q3_K,
                          TensorType::Q4_K, TensorType::Q5_K, TensorType::Q6_K}) {
    const double plain = output_error(type, l.w, quantize_rows(type, l, nullptr), l.rows, l.cols, h);
    const double weighted = output_error(type, l.w, quantize_rows(type, l, importance.data()), l.rows, l.cols, h);
    std::vector<uint8_t> q(static_cast<size_t>(gguf::row_bytes(type, l.cols) * l.rows));
    std::vector<float> w = l.w;
    gptq_quantize(type, w.data(), l.rows, l.cols, f, nullptr, q.data(), pool);
    const double gptq = output_error(type, l.w, q, l.rows, l.cols, h);
    w = l.w;
    gptq_quantize(type, w.data(), l.rows, l.cols, f, importance.data(), q.data(), pool);
    const double gptq_weighted = output_error(type, l.w, q, l.rows, l.cols, h);
    SCOPED_TRACE(gguf::tensor_type_name(type));
    EXPECT_LT(gptq, 0.8 * plain) << "plain " << plain << " weighted " << weighted;
    EXPECT_LT(gptq, weighted) << "plain " << plain;
    EXPECT_LT(gptq_weighted, weighted);
    std::printf("%-5s output error: plain %.4g, imatrix %.4g, gptq %.4g, gptq+imatrix %.4g\n",
                std::string(gguf::tensor_type_name(type)).c_str(), plain, weighted, gptq, gptq_weighted);
  }
}

TEST(Gptq, ResultDoesNotDependOnThreads) {
  ThreadPool one(1), three(3);
  const Layer l = make_layer(9, one);
  const GptqFactor f = gptq_factor(l.hessian.mean_full(), l.cols, 0.01, one);
  // The factorisation splits its columns over the pool: the same bits.
  EXPECT_EQ(f.u, gptq_factor(l.hessian.mean_full(), l.cols, 0.01, three).u);
  std::vector<uint8_t> a(static_cast<size_t>(gguf::row_bytes(TensorType::Q4_K, l.cols) * l.rows)), b(a.size());
  std::vector<float> w1 = l.w, w3 = l.w;
  gptq_quantize(TensorType::Q4_K, w1.data(), l.rows, l.cols, f, nullptr, a.data(), one);
  gptq_quantize(TensorType::Q4_K, w3.data(), l.rows, l.cols, f, nullptr, b.data(), three);
  EXPECT_EQ(a, b);
}

// A column whose input is always 0 carries no information; it must not
// break the factorisation.
TEST(Gptq, DeadInputColumns) {
  ThreadPool pool(1);
  const int64_t cols = 64;
  std::vector<float> x = synthetic_inputs(256, cols, 4);
  for (int64_t t = 0; t < 256; ++t) x[t * cols + 10] = x[t * cols + 33] = 0.0f;
  InputHessian h(cols);
  h.add(x.data(), 256, pool);
  const GptqFactor f = gptq_factor(h.mean_full(), cols, 0.01, pool);
  EXPECT_EQ(f.dead[10], 1);
  EXPECT_EQ(f.dead[33], 1);
  EXPECT_EQ(f.dead[11], 0);
  for (float v : f.u) ASSERT_TRUE(std::isfinite(v));
}

TEST(Awq, NeverWorseThanPlainRoundingAndHelpsOutlierChannels) {
  ThreadPool pool(2);
  const Layer l = make_layer(13, pool);
  const std::vector<double> h = l.hessian.mean_full();
  for (TensorType type : {TensorType::Q4_0, TensorType::Q3_K, TensorType::Q4_K}) {
    AwqOptions o;
    const AwqResult r =
        search_awq_scales({{type, l.w.data(), l.rows}}, l.cols, h, l.hessian.mean_abs(), l.hessian.mean_sq(), o, pool);
    SCOPED_TRACE(gguf::tensor_type_name(type));
    ASSERT_EQ(r.scales.size(), static_cast<size_t>(l.cols));
    EXPECT_LE(r.error, r.plain_error);
    EXPECT_GT(r.alpha, 0.0f);
    EXPECT_LT(r.error, 0.95 * r.plain_error);
    // The plain error is what plain rounding of the rows searched gives.
    EXPECT_NEAR(r.plain_error, output_error(type, l.w, quantize_rows(type, l, nullptr), l.rows, l.cols, h),
                1e-3 * r.plain_error);
    // The chosen factors scale the large channels up.
    EXPECT_GT(r.scales[5], r.scales[6]);
  }
}

TEST(QuantMethods, ParsesCombinationsAndRejectsUnknown) {
  EXPECT_EQ(parse_quant_methods("rtn")->name(), "rtn");
  EXPECT_EQ(parse_quant_methods("gptq")->name(), "gptq");
  EXPECT_EQ(parse_quant_methods("gptq+awq")->name(), "awq+gptq");
  EXPECT_EQ(parse_quant_methods("awq+gptq+imatrix")->name(), "awq+gptq+imatrix");
  EXPECT_TRUE(parse_quant_methods("awq")->calibrated());
  EXPECT_FALSE(parse_quant_methods("imatrix")->calibrated());
  EXPECT_FALSE(parse_quant_methods("gptq+"));
  EXPECT_FALSE(parse_quant_methods("smoothquant"));
  EXPECT_FALSE(parse_quant_methods(""));
}

}  // namespace
}  // namespace tokenmill::quant
