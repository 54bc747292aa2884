// GPTQ's act-order with static block grids, the choice of damping and
// order on the calibration loss, AWQ's clipping search, and the matmul
// hook of layer-by-layer calibration.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/matmul.h"
#include "kernels/quant.h"
#include "model/matmul_hook.h"
#include "quant/awq.h"
#include "quant/block_grid.h"
#include "quant/gptq.h"
#include "quant/gptq_search.h"
#include "quant/importance_quant.h"
#include "quant/input_hessian.h"
#include "quant/sequential_hook.h"
#include "quant/synthetic_layer_test_util.h"
#include "util/error.h"

namespace tokenmill::quant {
namespace {

using gguf::TensorType;
using synthetic_layer::Layer;
using synthetic_layer::make_layer;
using synthetic_layer::output_error;
using synthetic_layer::quantize_rows;

// Act-order: the factor's order sorts the Hessian's diagonal, the result
// is below importance-weighted rounding, and every block keeps the scales
// the type's quantizer gives the uncompensated row (static grids).
TEST(GptqActOrder, StaticGridsAndLessErrorThanRounding) {
  ThreadPool pool(2);
  const Layer l = make_layer(21, pool);
  const std::vector<double> h = l.hessian.mean_full();
  const std::vector<float> importance = l.hessian.mean_sq();
  const GptqFactor f = gptq_factor(h, l.cols, 0.01, pool, /*act_order=*/true);
  ASSERT_EQ(f.order.size(), static_cast<size_t>(l.cols));
  for (int64_t k = 1; k < l.cols; ++k)
    ASSERT_GE(h[f.order[k - 1] * l.cols + f.order[k - 1]], h[f.order[k] * l.cols + f.order[k]]);
  for (TensorType type : {TensorType::Q4_0, TensorType::Q5_1, TensorType::Q4_K, TensorType::Q6_K}) {
    SCOPED_TRACE(gguf::tensor_type_name(type));
    const std::vector<uint8_t> rounded = quantize_rows(type, l, importance.data());
    std::vector<uint8_t> q(rounded.size());
    std::vector<float> w = l.w;
    gptq_quantize(type, w.data(), l.rows, l.cols, f, importance.data(), q.data(), pool);
    EXPECT_LT(output_error(type, l.w, q, l.rows, l.cols, h), 0.8 * output_error(type, l.w, rounded, l.rows, l.cols, h));
    const int64_t block_bytes = gguf::tensor_type_info(type).bytes_per_block;
    for (size_t b = 0; b < q.size() / block_bytes; b += 7) {
      BlockGrid a, c;
      read_block_grid(type, rounded.data() + b * block_bytes, a);
      read_block_grid(type, q.data() + b * block_bytes, c);
      for (int i = 0; i < a.size; ++i) {
        ASSERT_EQ(a.step[i], c.step[i]) << "block " << b;
        ASSERT_EQ(a.offset[i], c.offset[i]) << "block " << b;
      }
    }
  }
}

// The search by coordinates: both orders at the first damping, then the
// other dampings in the winning order (and tenfold past the grid's edge
// while that wins); the chosen loss is the least of those, each as GPTQ
// with that factor on the samples gives it.
TEST(GptqSearch, ChoosesTheCandidateWithTheLeastOutputError) {
  ThreadPool pool(2);
  const Layer l = make_layer(23, pool);
  const std::vector<double> h = l.hessian.mean_full();
  const TensorType type = TensorType::Q4_0;
  const std::vector<GptqSample> samples{{type, l.w, l.rows, {}}};
  const std::vector<GptqSettings> candidates = default_gptq_candidates();
  ASSERT_EQ(candidates.size(), 6u);
  const GptqChoice c = choose_gptq(h, nullptr, l.cols, candidates, samples, nullptr, pool);
  const auto loss = [&](const GptqSettings& s) {
    const GptqFactor f = gptq_factor(h, l.cols, s.damp, pool, s.act_order);
    std::vector<uint8_t> q(static_cast<size_t>(gguf::row_bytes(type, l.cols) * l.rows));
    std::vector<float> w = l.w;
    gptq_quantize(type, w.data(), l.rows, l.cols, f, nullptr, q.data(), pool);
    return output_error(type, l.w, q, l.rows, l.cols, h);
  };
  const double natural = loss(candidates[0]), ordered = loss(candidates[1]);
  EXPECT_NEAR(c.first_loss, natural, 1e-3 * natural);
  const bool act_order = ordered < natural;
  double least = std::min(natural, ordered);
  for (const GptqSettings& s : candidates) {
    if (s.damp != candidates[0].damp && s.act_order == act_order) least = std::min(least, loss(s));
  }
  // The least of the grid, or less where the search went on past its edge.
  EXPECT_LE(c.loss, least * (1 + 1e-3));
  const double d = c.settings.damp;
  if (c.loss < least * (1 - 1e-3)) {
    EXPECT_TRUE(d < 0.001 || d > 0.1) << d;
  } else {
    EXPECT_TRUE(d == 0.001 || d == 0.01 || d == 0.1) << d;
  }
  EXPECT_EQ(c.settings.act_order, act_order);
  EXPECT_EQ(c.factor.order.empty(), !c.settings.act_order);
  // One candidate: used as given, nothing measured.
  const GptqSettings only{0.1, true};
  const GptqChoice one = choose_gptq(h, nullptr, l.cols, std::span(&only, 1), samples, nullptr, pool);
  EXPECT_EQ(one.settings.damp, 0.1);
  EXPECT_FALSE(one.factor.order.empty());
  EXPECT_THROW(choose_gptq(h, nullptr, l.cols, {}, samples, nullptr, pool), Error);
}

// Few calibration tokens for the width (96 for 512 columns): in-sample the
// loss prefers little damping, which does not carry over; measured on
// other inputs the choice damps more, and its loss on those inputs is the
// lower.
TEST(GptqSearch, HeldOutInputsChooseMoreDampingWhenTheFitIsShort) {
  ThreadPool pool(2);
  const Layer l = make_layer(37, pool);
  const std::vector<float> x = synthetic_layer::synthetic_inputs(96 + 2048, l.cols, 41);
  InputHessian fit(l.cols), check(l.cols);
  fit.add(x.data(), 96, pool);
  check.add(x.data() + 96 * l.cols, 2048, pool);
  const std::vector<double> hf = fit.mean_full(), hc = check.mean_full();
  const std::vector<GptqSample> samples{{TensorType::Q4_0, l.w, l.rows, {}}};
  const std::vector<GptqSettings> candidates = parse_gptq_candidates("auto", "natural");
  const GptqChoice in_sample = choose_gptq(hf, nullptr, l.cols, candidates, samples, nullptr, pool);
  const GptqChoice held_out = choose_gptq(hf, &hc, l.cols, candidates, samples, nullptr, pool);
  EXPECT_GT(held_out.settings.damp, in_sample.settings.damp);
  const auto loss_on_check = [&](const GptqChoice& c) {
    std::vector<uint8_t> q(static_cast<size_t>(gguf::row_bytes(TensorType::Q4_0, l.cols) * l.rows));
    std::vector<float> w = l.w;
    gptq_quantize(TensorType::Q4_0, w.data(), l.rows, l.cols, c.factor, nullptr, q.data(), pool);
    return output_error(TensorType::Q4_0, l.w, q, l.rows, l.cols, hc);
  };
  EXPECT_LT(loss_on_check(held_out), loss_on_check(in_sample));
  EXPECT_NEAR(held_out.loss, loss_on_check(held_out), 1e-3 * held_out.loss);
}

// Two collections merged are one collection of both.
TEST(InputHessian, MergeEqualsOneCollection) {
  ThreadPool pool(2);
  const std::vector<float> x = synthetic_layer::synthetic_inputs(200, 64, 43);
  InputHessian a(64), b(64), all(64);
  a.add(x.data(), 120, pool);
  b.add(x.data() + 120 * 64, 80, pool);
  all.add(x.data(), 200, pool);
  a.merge(b);
  EXPECT_EQ(a.count(), 200);
  const std::vector<double> m = a.mean_full(), e = all.mean_full();
  for (size_t i = 0; i < m.size(); ++i) ASSERT_NEAR(m[i], e[i], 1e-5 * (1.0 + std::fabs(e[i])));
  const std::vector<float> ma = a.mean_abs(), ea = all.mean_abs();
  for (size_t i = 0; i < ma.size(); ++i) ASSERT_NEAR(ma[i], ea[i], 1e-5f * (1.0f + ea[i]));
}

TEST(GptqSearch, ParsesTheFlags) {
  EXPECT_EQ(parse_gptq_candidates("auto", "auto").size(), 6u);
  const std::vector<GptqSettings> one = parse_gptq_candidates("0.05", "act-order");
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].damp, 0.05);
  EXPECT_TRUE(one[0].act_order);
  EXPECT_EQ(parse_gptq_candidates("auto", "natural").size(), 3u);
  EXPECT_EQ(gptq_candidates_name(one), "damp 0.05 act-order");
  EXPECT_THROW(parse_gptq_candidates("2", "auto"), Error);
  EXPECT_THROW(parse_gptq_candidates("0.01x", "auto"), Error);
  EXPECT_THROW(parse_gptq_candidates("auto", "sorted"), Error);
}

// Block-diagonal output error of rows quantized after clamping by ratios.
double block_error(TensorType type, const std::vector<float>& w, const std::vector<float>* ratios, int64_t rows,
                   int64_t cols, const std::vector<double>& h) {
  const int64_t qb = gguf::tensor_type_info(type).block_size;
  std::vector<float> c = w, back(static_cast<size_t>(cols));
  if (ratios != nullptr) apply_awq_clip(type, c.data(), 0, rows, cols, *ratios);
  std::vector<uint8_t> q(static_cast<size_t>(gguf::row_bytes(type, cols)));
  double e = 0.0;
  for (int64_t r = 0; r < rows; ++r) {
    quantize_row_weighted(type, c.data() + r * cols, q.data(), cols, nullptr);
    kernels::dequantize_row_ref(type, q.data(), back.data(), cols);
    for (int64_t b = 0; b < cols; b += qb) {
      for (int64_t i = b; i < b + qb; ++i) {
        for (int64_t j = b; j < b + qb; ++j)
          e += (w[r * cols + i] - back[i]) * h[i * cols + j] * (w[r * cols + j] - back[j]);
      }
    }
  }
  return e;
}

// Clipping never raises the error it minimises, and lowers it where a row
// has an outlier the grid would otherwise stretch to.
TEST(AwqClip, LowersTheBlockOutputErrorOfOutlierRows) {
  ThreadPool pool(2);
  Layer l = make_layer(29, pool);
  std::mt19937 rng(3);
  for (int64_t r = 0; r < l.rows; ++r) l.w[r * l.cols + (rng() % l.cols)] *= 12.0f;
  const std::vector<double> h = l.hessian.mean_full();
  for (TensorType type : {TensorType::Q4_0, TensorType::Q4_K}) {
    SCOPED_TRACE(gguf::tensor_type_name(type));
    const std::vector<float> ratios = search_awq_clip(type, l.w.data(), l.rows, l.cols, h, nullptr, 10, pool);
    const int64_t qb = gguf::tensor_type_info(type).block_size;
    ASSERT_EQ(ratios.size(), static_cast<size_t>(l.rows * l.cols / qb));
    int64_t clipped = 0;
    for (const float r : ratios) {
      ASSERT_LE(r, 1.0f);
      ASSERT_GE(r, 0.55f - 1e-6f);
      clipped += r < 1.0f;
    }
    EXPECT_GT(clipped, 0);
    const double plain = block_error(type, l.w, nullptr, l.rows, l.cols, h);
    EXPECT_LT(block_error(type, l.w, &ratios, l.rows, l.cols, h), plain);
  }
}

// With clipping ratios, GPTQ's static block scales are those of the
// clamped rows, while the rows themselves are not clamped: an outlier is
// rounded to the grid's end and its error compensated.
TEST(GptqClip, BlockScalesFromTheClampedCopy) {
  ThreadPool pool(2);
  const Layer l = make_layer(31, pool);
  const TensorType type = TensorType::Q4_0;
  const int64_t blocks = l.cols / 32, row_bytes = gguf::row_bytes(type, l.cols);
  std::vector<float> ratios(static_cast<size_t>(l.rows * blocks));
  for (size_t i = 0; i < ratios.size(); ++i) ratios[i] = i % 3 == 0 ? 0.6f : 1.0f;
  std::vector<float> clamped = l.w;
  apply_awq_clip(type, clamped.data(), 0, l.rows, l.cols, ratios);
  const GptqFactor f = gptq_factor(l.hessian.mean_full(), l.cols, 0.01, pool, /*act_order=*/true);
  std::vector<uint8_t> q(static_cast<size_t>(row_bytes * l.rows)), expected(q.size());
  std::vector<float> w = l.w;
  gptq_quantize(type, w.data(), l.rows, l.cols, f, nullptr, q.data(), pool, ratios.data());
  for (int64_t r = 0; r < l.rows; ++r)
    quantize_row_weighted(type, clamped.data() + r * l.cols, expected.data() + r * row_bytes, l.cols, nullptr);
  const int64_t block_bytes = gguf::tensor_type_info(type).bytes_per_block;
  for (size_t b = 0; b < q.size() / block_bytes; ++b) {
    BlockGrid a, c;
    read_block_grid(type, expected.data() + b * block_bytes, a);
    read_block_grid(type, q.data() + b * block_bytes, c);
    ASSERT_EQ(a.step[0], c.step[0]) << "block " << b;
  }
}

// Records whether it was called, and lets the model compute.
class CountingHook : public model::MatmulHook {
 public:
  bool matmul(const kernels::WeightView&, const float*, int64_t, float*, ThreadPool&) override {
    ++calls;
    return false;
  }
  int calls = 0;
};

// A substituted matrix runs on its encoded bytes in the float model's
// basis: stored = Q(diag(1/r) W diag(s)), and y = r * ((x / s) stored^T)
// reproduces x W^T to Q8_0's precision; skipped matrices write zeros; the
// rest go to the inner hook.
TEST(SequentialHook, SubstitutesInTheFloatBasisSkipsAndPassesOn) {
  ThreadPool pool(2);
  const int64_t rows = 8, cols = 64, tokens = 3;
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> w(rows * cols), x(tokens * cols), s(cols), r(rows);
  for (float& v : w) v = dist(rng);
  for (float& v : x) v = dist(rng);
  for (float& v : s) v = 0.5f + std::fabs(dist(rng));
  for (float& v : r) v = 0.5f + std::fabs(dist(rng));
  std::vector<float> stored(w.size());
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j) stored[i * cols + j] = w[i * cols + j] * s[j] / r[i];
  }
  std::vector<uint8_t> q(static_cast<size_t>(gguf::row_bytes(TensorType::Q8_0, cols) * rows));
  for (int64_t i = 0; i < rows; ++i)
    kernels::quantize_row_ref(TensorType::Q8_0, stored.data() + i * cols,
                              q.data() + i * gguf::row_bytes(TensorType::Q8_0, cols), cols);
  const kernels::WeightView source{TensorType::F32, w.data(), rows, cols, nullptr};
  float other_data = 0.0f, skipped_data = 0.0f;
  CountingHook inner;
  SequentialHook hook(inner);
  hook.substitute(w.data(), {TensorType::Q8_0, q.data(), rows, cols, nullptr}, &s, &r);
  hook.skip(&skipped_data);
  std::vector<float> y(tokens * rows), expected(y.size());
  ASSERT_TRUE(hook.matmul(source, x.data(), tokens, y.data(), pool));
  // Exactly the encoded product: r * ((x / s) stored^T)...
  std::vector<float> xs(x.size()), exact(y.size());
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t j = 0; j < cols; ++j) xs[t * cols + j] = x[t * cols + j] / s[j];
  }
  kernels::matmul_ref({TensorType::Q8_0, q.data(), rows, cols, nullptr}, xs.data(), tokens, exact.data());
  double diff = 0.0, norm = 0.0;
  kernels::matmul_ref(source, x.data(), tokens, expected.data());
  for (size_t i = 0; i < y.size(); ++i) {
    EXPECT_NEAR(y[i], exact[i] * r[i % rows], 1e-3f * (1.0f + std::fabs(exact[i] * r[i % rows])));
    diff += (y[i] - expected[i]) * (y[i] - expected[i]);
    norm += expected[i] * expected[i];
  }
  // ...which is x W^T to Q8_0's precision.
  EXPECT_LT(std::sqrt(diff / norm), 0.01);
  std::vector<float> z(tokens * rows, 1.0f);
  ASSERT_TRUE(hook.matmul({TensorType::F32, &skipped_data, rows, cols, nullptr}, x.data(), tokens, z.data(), pool));
  for (float v : z) EXPECT_EQ(v, 0.0f);
  EXPECT_EQ(inner.calls, 0);
  EXPECT_FALSE(hook.matmul({TensorType::F32, &other_data, rows, cols, nullptr}, x.data(), tokens, z.data(), pool));
  EXPECT_EQ(inner.calls, 1);
}

}  // namespace
}  // namespace tokenmill::quant
