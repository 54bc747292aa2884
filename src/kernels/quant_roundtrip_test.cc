// Quantize -> dequantize on random data: per-type error bounds, importance
// weighting, and degenerate rows (zeros, constants, outliers).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/tensor_type.h"
#include "kernels/quant.h"
#include "kernels/quant_blocks.h"
#include "kernels/test_util.h"
#include "util/fp16.h"

namespace tokenmill::kernels {
namespace {

using gguf::TensorType;

using testing::gaussian;

std::vector<uint8_t> quantize(TensorType type, const std::vector<float>& x, const float* importance = nullptr) {
  std::vector<uint8_t> bytes(gguf::row_bytes(type, static_cast<int64_t>(x.size())));
  quantize_row_ref(type, x.data(), bytes.data(), static_cast<int64_t>(x.size()), importance);
  return bytes;
}

std::vector<float> roundtrip(TensorType type, const std::vector<float>& x, const float* importance = nullptr) {
  const auto bytes = quantize(type, x, importance);
  std::vector<float> y(x.size());
  dequantize_row_ref(type, bytes.data(), y.data(), static_cast<int64_t>(x.size()));
  return y;
}

double relative_rmse(const std::vector<float>& x, const std::vector<float>& y) {
  double err = 0, sig = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    err += (double(x[i]) - y[i]) * (double(x[i]) - y[i]);
    sig += double(x[i]) * x[i];
  }
  return std::sqrt(err / sig);
}

// Bounds on RMSE / RMS(signal) for N(0, 1) data. A uniform quantizer with
// step D has RMSE ~ D / sqrt(12). Each bound is that estimate for the type's
// step plus headroom for scale quantization:
//  Q8: D = amax / 127 ~ 2.1 / 127 (32 samples) -> 0.5%; bound 0.6%.
//  Q8_K: D = amax / 128 ~ 2.9 / 128 (256 samples) -> 0.65%; bound 0.8%.
//  Q6_K: D ~ 1.9 / 32 (16 samples, 6-bit symmetric) -> 1.7%; bound 2%.
//  Q5_0: D ~ 2.1 / 16 -> 3.8%; Q5_1/Q5_K: D ~ 4.1 / 31 -> 3.8%; bound 4.5%.
//  Q4_0: D ~ 2.1 / 8 -> 7.6%; Q4_1/Q4_K: D ~ 4.1 / 15 -> 7.9%; bound 9%.
//  (Q4_0/Q5_0 measure ~8.7%/4.3%: D varies per block, E[D^2] > E[D]^2, and
//  the missing top code costs up to a full step, see below.)
//  Q3_K: D ~ 1.9 / 4 (16 samples, 3-bit) -> 13.7%; bound 16%.
//  Q2_K: D ~ 3.5 / 3 (16 samples, 2-bit asym) -> 34%; bound 35%.
// The scale searches of the K types come in well under these.
struct Bound {
  TensorType type;
  double rmse;
};
constexpr Bound kBounds[] = {
    {TensorType::F16, 0.0005}, {TensorType::BF16, 0.004}, {TensorType::Q8_0, 0.006}, {TensorType::Q8_1, 0.006},
    {TensorType::Q8_K, 0.008}, {TensorType::Q6_K, 0.02},  {TensorType::Q5_0, 0.045}, {TensorType::Q5_1, 0.045},
    {TensorType::Q5_K, 0.045}, {TensorType::Q4_0, 0.09},  {TensorType::Q4_1, 0.09},  {TensorType::Q4_K, 0.09},
    {TensorType::Q3_K, 0.16},  {TensorType::Q2_K, 0.35},
};

TEST(QuantRoundtrip, RmseWithinTypeBound) {
  const auto x = gaussian(256 * 64, 1234);
  for (const auto& b : kBounds) {
    ASSERT_TRUE(can_quantize(b.type));
    const double rmse = relative_rmse(x, roundtrip(b.type, x));
    EXPECT_LT(rmse, b.rmse) << gguf::tensor_type_name(b.type);
    std::printf("  %-5s relative RMSE %.4f (bound %.4f)\n", std::string(gguf::tensor_type_name(b.type)).c_str(), rmse,
                b.rmse);
  }
}

TEST(QuantRoundtrip, F32IsExactAndF16MatchesConversion) {
  const auto x = gaussian(64, 7, 100.0f);
  EXPECT_EQ(roundtrip(TensorType::F32, x), x);
  const auto y = roundtrip(TensorType::F16, x);
  for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(y[i], fp16_to_fp32(fp32_to_fp16(x[i])));
}

// Symmetric legacy types and Q8_K round to nearest: per-element error at
// most half the block's step d (ties have probability zero on random data).
// Q4_0/Q5_0 map the largest-magnitude value to the extra negative code, so
// a value of opposite sign near it needs code +8 (+16), which does not
// exist: beyond 7.5 (15.5) steps the error grows to at most one step.
void expect_symmetric_error(float x, float y, float d, int top_code, const char* what) {
  const float steps = x / d;
  const float bound = steps > top_code + 0.5f ? (steps - top_code) * std::fabs(d) : 0.5f * std::fabs(d);
  ASSERT_LE(std::fabs(x - y), bound * 1.0001f) << what;
  ASSERT_LE(std::fabs(x - y), std::fabs(d) * 1.0001f) << what;
}

TEST(QuantRoundtrip, LegacyErrorAtMostHalfStep) {
  const auto x = gaussian(32 * 64, 99, 3.0f);
  const std::pair<TensorType, int> types[] = {{TensorType::Q8_0, 127}, {TensorType::Q4_0, 7}, {TensorType::Q5_0, 15}};
  for (const auto& [type, top_code] : types) {
    const auto bytes = quantize(type, x);
    const auto y = roundtrip(type, x);
    const int64_t bpb = gguf::tensor_type_info(type).bytes_per_block;
    for (size_t i = 0; i < x.size(); ++i) {
      uint16_t dh;
      std::memcpy(&dh, bytes.data() + (i / 32) * bpb, 2);  // d leads each block
      expect_symmetric_error(x[i], y[i], fp16_to_fp32(dh), top_code, gguf::tensor_type_name(type).data());
    }
  }
  const auto z = gaussian(256 * 4, 5);
  const auto bytes = quantize(TensorType::Q8_K, z);
  const auto* blocks = reinterpret_cast<const BlockQ8_K*>(bytes.data());
  const auto y = roundtrip(TensorType::Q8_K, z);
  for (size_t i = 0; i < z.size(); ++i) expect_symmetric_error(z[i], y[i], blocks[i / 256].d, 127, "Q8_K");
}

// Q4_1/Q5_1: error at most half a step, plus the fp16 rounding of the min.
TEST(QuantRoundtrip, MinMaxErrorAtMostHalfStep) {
  const auto x = gaussian(32 * 64, 17, 2.0f);
  for (TensorType type : {TensorType::Q4_1, TensorType::Q5_1}) {
    const auto bytes = quantize(type, x);
    const auto y = roundtrip(type, x);
    const int64_t bpb = gguf::tensor_type_info(type).bytes_per_block;
    for (size_t i = 0; i < x.size(); ++i) {
      uint16_t dh, mh;
      std::memcpy(&dh, bytes.data() + (i / 32) * bpb, 2);
      std::memcpy(&mh, bytes.data() + (i / 32) * bpb + 2, 2);
      const float slack = std::fabs(fp16_to_fp32(mh)) * 0x1p-11f;
      ASSERT_LE(std::fabs(x[i] - y[i]), 0.5f * fp16_to_fp32(dh) * 1.0001f + slack) << i;
    }
  }
}

TEST(QuantRoundtrip, IntermediateSumsAreConsistent) {
  const auto x = gaussian(256 * 2, 3);
  const auto k = quantize(TensorType::Q8_K, x);
  const auto* kb = reinterpret_cast<const BlockQ8_K*>(k.data());
  for (int b = 0; b < 2; ++b) {
    for (int g = 0; g < 16; ++g) {
      int sum = 0;
      for (int i = 0; i < 16; ++i) sum += kb[b].qs[16 * g + i];
      EXPECT_EQ(kb[b].bsums[g], sum);
    }
  }
  const auto one = quantize(TensorType::Q8_1, x);
  const auto* ob = reinterpret_cast<const BlockQ8_1*>(one.data());
  for (int b = 0; b < 16; ++b) {
    int sum = 0;
    for (int i = 0; i < 32; ++i) sum += ob[b].qs[i];
    const float expect = fp16_to_fp32(ob[b].d) * static_cast<float>(sum);
    EXPECT_NEAR(fp16_to_fp32(ob[b].s), expect, std::fabs(expect) * 1e-3 + 1e-6);
  }
}

// Values already on a type's grid (a decoded block) should quantize back to
// (nearly) themselves: the scale search must find the grid it came from,
// not drift. Legacy types and Q3_K are exact fixed points; the K types with
// fp16 super-scales may settle on a slightly different scale code set, so
// they get a quarter of the first pass's error. (Gemma 3 270M's Q4_K/Q6_K
// weights, quantized by llama.cpp, requantize to within 1e-4.)
TEST(QuantRoundtrip, RequantizingDecodedValuesIsNearlyLossless) {
  const auto x = gaussian(256 * 16, 77);
  for (const auto& b : kBounds) {
    const auto y = roundtrip(b.type, x);
    const double first = relative_rmse(x, y);
    const double again = relative_rmse(y, roundtrip(b.type, y));
    EXPECT_LE(again, 0.25 * first) << gguf::tensor_type_name(b.type);
    std::printf("  %-5s requantization relative RMSE %.2g\n", std::string(gguf::tensor_type_name(b.type)).c_str(),
                again);
  }
}

constexpr TensorType kKTypes[] = {TensorType::Q2_K, TensorType::Q3_K, TensorType::Q4_K, TensorType::Q5_K,
                                  TensorType::Q6_K};

double weighted_error(const std::vector<float>& x, const std::vector<float>& y, const std::vector<float>& w) {
  double e = 0;
  for (size_t i = 0; i < x.size(); ++i) e += w[i] * (double(x[i]) - y[i]) * (double(x[i]) - y[i]);
  return e;
}

// Importance on 1 element in 16 (weight 100, others 1): honouring it must
// lower the importance-weighted error clearly, as a model whose activations
// hit those columns hardest would need.
TEST(QuantRoundtrip, ImportanceLowersWeightedError) {
  const auto x = gaussian(256 * 32, 2024);
  std::vector<float> w(x.size(), 1.0f);
  for (size_t i = 5; i < w.size(); i += 16) w[i] = 100.0f;
  for (TensorType type : kKTypes) {
    const double plain = weighted_error(x, roundtrip(type, x), w);
    const double weighted = weighted_error(x, roundtrip(type, x, w.data()), w);
    EXPECT_LT(weighted, 0.9 * plain) << gguf::tensor_type_name(type);
    std::printf("  %-5s weighted error %.4g with importance vs %.4g without\n",
                std::string(gguf::tensor_type_name(type)).c_str(), weighted, plain);
  }
}

// Largest |y - x| / amax on a row of one sign (the "negative" row below):
// about half a step of the type's code grid, scale rounding included.
// Measured (seed 8, amax 3.68): Q8_0/Q8_K 0.0039 (half of 1/127), Q6_K
// 0.0156 (half of 1/32), Q5_0 0.030 (half of 1/16), Q5_1/Q5_K 0.011 and
// Q4_1/Q4_K 0.023 (half of range/31 and range/15, the row's range being 0.73
// of amax), Q4_0 0.062 (half of 1/8), Q2_K 0.118, Q3_K 0.136 (2 and 3 bits
// per 16 values, with quantized sub-block scales). Bounds: 1.5x measured.
// A collapsed decode fails them all: zeros miss every value of that row by
// at least 1 = 0.27 amax, its mean misses by up to 0.5 amax.
struct GridBound {
  TensorType type;
  double max_err;  // fraction of amax
};
constexpr GridBound kGridBounds[] = {
    {TensorType::Q8_0, 0.006}, {TensorType::Q8_K, 0.006}, {TensorType::Q6_K, 0.024}, {TensorType::Q5_0, 0.045},
    {TensorType::Q5_1, 0.017}, {TensorType::Q5_K, 0.017}, {TensorType::Q4_0, 0.093}, {TensorType::Q4_1, 0.035},
    {TensorType::Q4_K, 0.035}, {TensorType::Q3_K, 0.2},   {TensorType::Q2_K, 0.18},
};

constexpr size_t kOutlierAt = 77;

// Bound of |y[i] - x[i]| for element i of the degenerate row `name`.
double degenerate_bound(std::string_view name, const GridBound& b, double amax, size_t i) {
  // Zeros decode to zeros exactly (a zero scale, or zero codes).
  if (name == "zeros") return 0.0;
  // Every value of a constant row is the row's amax: it lands on the top
  // code (or on the min) and is off only by the rounding of the fp16 scales
  // to 11 significant bits, 2^-11 each (K types multiply two). Measured at
  // most 2.9e-4 of the value (Q6_K); bound 2^-10 = 9.8e-4.
  if (name == "constant" || name == "negative constant") return 0x1p-10 * amax;
  if (name == "negative") return b.max_err * amax;
  // The outlier (50) is its block's amax: the same 2^-10 as a constant
  // (measured <= 3.1e-4 of 50). The N(0, 0.01) values beside it may flush
  // to zero (a sub-block scale code rounds to 0 beside the outlier's) but
  // not be pushed onto the outlier's grid (8-bit step 50/127 = 0.39):
  // measured at most 0.046 (Q2_K, whose min shifts them); bound 0.1.
  if (name == "outlier") return i == kOutlierAt ? 0x1p-10 * amax : 0.1;
  // Tiny rows (sigma 1e-6, amax 3.5e-6) put the fp16 scales among the
  // subnormals (step 2^-24 = 6e-8), a few steps per scale: measured up to
  // 0.24 of amax (Q2_K; Q5_1 0.17, Q3_K 0.12, Q8_K with its f32 scale
  // 0.004); bound 0.5 of amax, so a flush to zero (error amax) fails. Q8_0
  // alone flushes, see the caller.
  return 0.5 * amax;
}

// Rows that stress the scale searches must decode to finite values close to
// the input: zeros, a constant, only-negative values, one outlier, tiny
// values, and importance that is zero everywhere.
TEST(QuantRoundtrip, DegenerateRows) {
  std::vector<std::pair<const char*, std::vector<float>>> rows;
  rows.emplace_back("zeros", std::vector<float>(256, 0.0f));
  rows.emplace_back("constant", std::vector<float>(256, 0.75f));
  rows.emplace_back("negative constant", std::vector<float>(256, -0.75f));
  auto neg = gaussian(256, 8);
  for (auto& v : neg) v = -std::fabs(v) - 1.0f;
  rows.emplace_back("negative", neg);
  auto outlier = gaussian(256, 9, 0.01f);
  outlier[kOutlierAt] = 50.0f;
  rows.emplace_back("outlier", outlier);
  rows.emplace_back("tiny", gaussian(256, 10, 1e-6f));
  const std::vector<float> zero_importance(256, 0.0f);
  for (const auto& [name, x] : rows) {
    double amax = 0;
    // std::max, not std::fmax: the AArch64 GCC 12 vectorizer crashes on an
    // fmax reduction here (the values are finite either way).
    for (float v : x) amax = std::max(amax, static_cast<double>(std::fabs(v)));
    // Q8_0's scale of a tiny row, amax / 127 = 2.8e-8, is below half the
    // smallest fp16 subnormal (2^-25 = 3.0e-8): it rounds to 0 and the whole
    // row must decode to exactly zero.
    const bool flushes = std::string_view(name) == "tiny" && amax / 127 < 0x1p-25;
    for (const GridBound& b : kGridBounds) {
      const std::string what = std::string(name) + " " + std::string(gguf::tensor_type_name(b.type));
      for (const float* imp : {static_cast<const float*>(nullptr), zero_importance.data()}) {
        const auto y = roundtrip(b.type, x, imp);
        for (size_t i = 0; i < x.size(); ++i) {
          ASSERT_TRUE(std::isfinite(y[i])) << what;
          if (flushes && b.type == TensorType::Q8_0) {
            ASSERT_EQ(y[i], 0.0f) << what << " " << i;
          } else {
            ASSERT_LE(std::fabs(y[i] - x[i]), degenerate_bound(name, b, amax, i)) << what << " " << i;
          }
        }
      }
    }
  }
}

TEST(QuantRoundtrip, ConstantRowsAreExactForMinTypes) {
  const std::vector<float> x(256, -0.75f);  // representable exactly as a min
  for (TensorType type : {TensorType::Q4_1, TensorType::Q5_1, TensorType::Q2_K, TensorType::Q4_K, TensorType::Q5_K}) {
    const auto y = roundtrip(type, x);
    for (size_t i = 0; i < x.size(); ++i) ASSERT_NEAR(y[i], -0.75f, 0.75f * 0x1p-10f) << gguf::tensor_type_name(type);
  }
}

}  // namespace
}  // namespace tokenmill::kernels
