// The pieces of the q4_0_kc KV cache's key scaling, each against what it
// must preserve: q.k per query head, RoPE rotations, the magnitudes' pairs.
#include "model/key_channel_scales.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/rope.h"
#include "model/test_gguf_variants.h"

namespace tokenmill::model {
namespace {

std::vector<float> random_rows(int64_t n, uint32_t seed, float spread) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (size_t i = 0; i < v.size(); ++i) v[i] = dist(rng) * (1.0f + spread * static_cast<float>(i % 7));
  return v;
}

double dot(const float* a, const float* b, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += double(a[i]) * double(b[i]);
  return s;
}

TEST(KeyChannelScales, RotatedPairsShareTheirLength) {
  for (bool neox : {false, true}) {
    const KeyHeads heads{2, 1, 6, 4, neox};           // channels 4 and 5 are not rotated
    const std::vector<float> k = {3, 4, 0, 0, -7, 1,  //
                                  0, 0, 1, 0, 2,  -9};
    std::vector<float> m(6, 0.0f);
    accumulate_key_magnitudes(k.data(), 2, heads, m.data());
    if (neox) {  // pairs (0,2), (1,3): lengths 3 and 4 (row 0), 1 and 0 (row 1)
      EXPECT_EQ(m, (std::vector<float>{3, 4, 3, 4, 7, 9}));
    } else {  // pairs (0,1), (2,3): 5 and 0 (row 0), 0 and 1 (row 1)
      EXPECT_EQ(m, (std::vector<float>{5, 5, 1, 1, 7, 9}));
    }
  }
}

TEST(KeyChannelScales, ScalesAreFlooredPerHeadAndSilentHeadsKeepOne) {
  const std::vector<float> m = {32, 1, 4, 0,   // head 0: floor 32/16 = 2
                                0,  0, 0, 0};  // head 1: silent
  const std::vector<float> s = key_scales_from_magnitudes(m, 4);
  EXPECT_EQ(s, (std::vector<float>{32, 2, 4, 2, 1, 1, 1, 1}));
}

// q.k is unchanged for every query head and the key head it reads (GQA:
// two query heads per key head), while the scaled key channels end up in
// one range.
TEST(KeyChannelScales, QueryTimesKeyIsUnchanged) {
  const KeyHeads heads{4, 2, 8, 8, true};
  const int64_t T = 3;
  std::vector<float> q = random_rows(T * 4 * 8, 1, 0.0f);
  std::vector<float> k = random_rows(T * 2 * 8, 2, 4.0f);
  const std::vector<float> q0 = q, k0 = k;
  std::vector<float> m(16, 0.0f);
  accumulate_key_magnitudes(k.data(), T, heads, m.data());
  const std::vector<float> scale = key_scales_from_magnitudes(m, 8);
  apply_key_scales(q.data(), k.data(), T, heads, scale);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t u = 0; u < T; ++u)
      for (int64_t j = 0; j < 4; ++j) {
        const int64_t h = j / 2;
        const double before = dot(&q0[(t * 4 + j) * 8], &k0[(u * 2 + h) * 8], 8);
        const double after = dot(&q[(t * 4 + j) * 8], &k[(u * 2 + h) * 8], 8);
        EXPECT_NEAR(after, before, 1e-5 * (1 + std::fabs(before))) << t << " " << u << " " << j;
      }
  for (float x : k) EXPECT_LE(std::fabs(x), 1.0f + 1e-6f);  // every channel within its calibrated length
  EXPECT_NE(q, q0);
}

// Rotating a scaled key equals scaling the rotated key: the pairs share a
// scale, so Model::shift_keys may rotate stored keys as they are.
TEST(KeyChannelScales, RotationCommutesWithTheScaling) {
  for (bool neox : {false, true}) {
    const KeyHeads heads{1, 1, 8, 6, neox};
    std::vector<float> k = random_rows(8, 3, 3.0f);
    std::vector<float> m(8, 0.0f);
    accumulate_key_magnitudes(k.data(), 1, heads, m.data());
    const std::vector<float> scale = key_scales_from_magnitudes(m, 8);
    std::vector<float> q(8, 1.0f);
    std::vector<float> rotated_then_scaled = k;
    kernels::rope(rotated_then_scaled.data(), 8, 6, 37, 10000.0f, 1.0f, nullptr, neox);
    std::vector<float> unused_q = q;
    apply_key_scales(unused_q.data(), rotated_then_scaled.data(), 1, heads, scale);
    std::vector<float> scaled_then_rotated = k;
    apply_key_scales(q.data(), scaled_then_rotated.data(), 1, heads, scale);
    kernels::rope(scaled_then_rotated.data(), 8, 6, 37, 10000.0f, 1.0f, nullptr, neox);
    for (size_t c = 0; c < 8; ++c) EXPECT_NEAR(scaled_then_rotated[c], rotated_then_scaled[c], 1e-5) << neox << c;
  }
}

TEST(KeyChannelScales, CalibrationTokensAreFixedAndInsideTheVocabulary) {
  test_files::TinyModelFile tiny(SynthArch::kLlama, 4, "tm_key_calibration");
  const Model& m = tiny.model();
  const int64_t vocab = m.config().n_vocab;
  const std::vector<int32_t> a = key_calibration_tokens(m.file(), vocab, 100);
  EXPECT_EQ(a, key_calibration_tokens(m.file(), vocab, 100));
  EXPECT_FALSE(a.empty());
  EXPECT_LE(a.size(), 100u);
  for (int32_t t : a) EXPECT_TRUE(t >= 0 && t < vocab) << t;
  EXPECT_EQ(key_calibration_tokens(m.file(), vocab, 7).size(), 7u);
}

}  // namespace
}  // namespace tokenmill::model
