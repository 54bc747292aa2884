#include "kernels/rope.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <vector>

namespace tokenmill::kernels {
namespace {

// The YaRN angle of pair i, written out per element from the formulas in
// rope.h (the angle blended, not the frequency), in float64.
struct YarnCase {
  int64_t dims;
  double base, factor;
  int64_t orig_ctx;
  double beta_fast, beta_slow, attn_factor;
};

double reference_corr(const YarnCase& c, double beta) {
  return c.dims * std::log(c.orig_ctx / (beta * 2 * std::numbers::pi)) / (2 * std::log(c.base));
}

void reference_yarn(const YarnCase& c, int64_t pos, std::vector<double>& cos_out, std::vector<double>& sin_out) {
  const double low = std::max(0.0, std::floor(reference_corr(c, c.beta_fast)));
  const double high = std::min(c.dims - 1.0, std::ceil(reference_corr(c, c.beta_slow)));
  const double mscale = c.attn_factor * (1 + 0.1 * std::log(c.factor));
  cos_out.assign(static_cast<size_t>(c.dims / 2), 0.0);
  sin_out = cos_out;
  for (int64_t i = 0; i < c.dims / 2; ++i) {
    const double theta_extrap = static_cast<double>(pos) / std::pow(c.base, 2.0 * i / c.dims);
    const double theta_interp = theta_extrap / c.factor;
    double y = (i - low) / std::max(0.001, high - low);
    y = y < 0 ? 0 : y > 1 ? 1 : y;
    const double ramp = 1 - y;
    const double theta = theta_interp * (1 - ramp) + theta_extrap * ramp;
    cos_out[static_cast<size_t>(i)] = std::cos(theta) * mscale;
    sin_out[static_cast<size_t>(i)] = std::sin(theta) * mscale;
  }
}

RopeScaling yarn_scaling(const YarnCase& c) {
  RopeScaling s;
  s.freq_scale = 1.0 / c.factor;
  s.ext_factor = 1.0;
  s.attn_factor = c.attn_factor;
  s.orig_ctx = c.orig_ctx;
  s.beta_fast = c.beta_fast;
  s.beta_slow = c.beta_slow;
  return s;
}

// Shapes of real models (Qwen2.5 128 dims / 1e6 / x4 / 32768) and of the
// synthetic test files (16 dims, orig 64), at positions inside and far past
// the original context.
TEST(RopeYarn, MatchesPerElementReference) {
  const YarnCase cases[] = {
      {128, 1e6, 4.0, 32768, 32, 1, 1.0},
      {16, 1e6, 4.0, 64, 32, 1, 1.0},
      {16, 10000.0, 8.0, 64, 32, 1, 0.8},
      {64, 10000.0, 2.5, 4096, 16, 2, 1.0},
  };
  for (const YarnCase& c : cases) {
    const RopeFrequencies f = rope_frequencies(c.dims, c.base, yarn_scaling(c), nullptr);
    std::vector<double> cr, sr, co(static_cast<size_t>(c.dims / 2)), so(co.size());
    for (int64_t pos : {int64_t{0}, int64_t{1}, int64_t{63}, int64_t{300}, int64_t{100000}}) {
      reference_yarn(c, pos, cr, sr);
      rope_angles(f, pos, co.data(), so.data());
      for (size_t i = 0; i < co.size(); ++i) {
        EXPECT_NEAR(co[i], cr[i], 1e-9) << "dims " << c.dims << " pos " << pos << " pair " << i;
        EXPECT_NEAR(so[i], sr[i], 1e-9) << "dims " << c.dims << " pos " << pos << " pair " << i;
      }
    }
  }
}

// Qwen2.5-style numbers worked by hand: corr(32) = 128 ln(32768 / (64 pi)) /
// (2 ln 1e6) = 23.6 -> low 23; corr(1) = 128 ln(32768 / (2 pi)) / (2 ln 1e6)
// = 39.65 -> high 40.
TEST(RopeYarn, CorrectionDimsHandComputed) {
  double corr[2];
  yarn_corr_dims(128, 32768, 1e6, 32, 1, corr);
  EXPECT_EQ(corr[0], 23.0);
  EXPECT_EQ(corr[1], 40.0);
  // A tiny original context puts the whole range below 0: clamped.
  yarn_corr_dims(16, 4, 1e6, 32, 1, corr);
  EXPECT_EQ(corr[0], 0.0);
}

// Fast pairs keep their unscaled frequency, slow ones are interpolated, and
// the magnitude grows by 1 + 0.1 ln(factor).
TEST(RopeYarn, EndsOfTheRamp) {
  const YarnCase c{128, 1e6, 4.0, 32768, 32, 1, 1.0};
  const RopeFrequencies f = rope_frequencies(c.dims, c.base, yarn_scaling(c), nullptr);
  EXPECT_DOUBLE_EQ(f.freq[0], 1.0);
  EXPECT_NEAR(f.freq[10], std::pow(1e6, -20.0 / 128), 1e-15);
  EXPECT_NEAR(f.freq[63], std::pow(1e6, -126.0 / 128) / 4.0, 1e-18);
  EXPECT_NEAR(f.mscale, 1 + 0.1 * std::log(4.0), 1e-15);
}

// Without YaRN the table is the plain one: linear scaling and factors.
TEST(RopeYarn, LinearAndFactorsWithoutRamp) {
  const float factors[2] = {2.0f, 4.0f};
  RopeScaling s;
  s.freq_scale = 0.5;
  s.attn_factor = 1.0;
  const RopeFrequencies f = rope_frequencies(4, 100.0, s, factors);
  EXPECT_DOUBLE_EQ(f.freq[0], 0.5 / 2.0);
  EXPECT_DOUBLE_EQ(f.freq[1], 0.5 * 0.1 / 4.0);
  EXPECT_EQ(f.mscale, 1.0);
}

// A planted mistake the reference must notice: the ramp reversed (slow
// pairs extrapolated) changes the angles by far more than the tolerance.
TEST(RopeYarn, ReferenceNoticesReversedRamp) {
  const YarnCase c{16, 1e6, 4.0, 64, 32, 1, 1.0};
  RopeScaling wrong = yarn_scaling(c);
  wrong.beta_fast = 1;
  wrong.beta_slow = 32;
  const RopeFrequencies f = rope_frequencies(c.dims, c.base, wrong, nullptr);
  std::vector<double> cr, sr, co(8), so(8);
  reference_yarn(c, 300, cr, sr);
  rope_angles(f, 300, co.data(), so.data());
  double worst = 0;
  for (size_t i = 0; i < co.size(); ++i) worst = std::max(worst, std::abs(co[i] - cr[i]));
  EXPECT_GT(worst, 1e-2);
}

}  // namespace
}  // namespace tokenmill::kernels
