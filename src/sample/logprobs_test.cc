#include "sample/logprobs.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

namespace tokenmill::sample {
namespace {

TEST(Logprobs, LogSumExpAndLogprobOf) {
  const std::vector<float> logits = {1.0f, 2.0f, 3.0f};
  const double lse = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0));  // 3.40760596
  EXPECT_NEAR(log_sum_exp(logits), lse, 1e-9);
  EXPECT_NEAR(logprob_of(logits, 0), 1.0 - lse, 1e-6);
  EXPECT_NEAR(logprob_of(logits, 2), 3.0 - lse, 1e-6);
  // Stable for huge logits where a naive exp would overflow.
  const std::vector<float> big = {1000.0f, 1000.0f};
  EXPECT_NEAR(logprob_of(big, 1), -std::log(2.0), 1e-6);
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(log_sum_exp(std::vector<float>{-inf, -inf}), -inf);
  EXPECT_EQ(logprob_of(std::vector<float>{-inf, 0.0f}, 0), -inf);
}

TEST(Logprobs, TopNBestFirstTiesByLowerId) {
  const std::vector<float> logits = {0.5f, 2.0f, -1.0f, 2.0f, 1.0f, std::nanf("")};
  const auto top = top_logprobs(logits, 3);
  ASSERT_EQ(top.size(), 3u);
  EXPECT_EQ(top[0].first, 1);
  EXPECT_EQ(top[1].first, 3);
  EXPECT_EQ(top[2].first, 4);
  const double lse = std::log(std::exp(0.5) + 2 * std::exp(2.0) + std::exp(-1.0) + std::exp(1.0));
  EXPECT_NEAR(top[0].second, 2.0 - lse, 1e-6);
  EXPECT_NEAR(top[2].second, 1.0 - lse, 1e-6);

  EXPECT_EQ(top_logprobs(logits, 10).size(), 5u);  // NaN skipped
  EXPECT_TRUE(top_logprobs(logits, 0).empty());
}

TEST(Logprobs, TopNOnLargeRowMatchesSort) {
  std::vector<float> logits(5000);
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = std::sin(static_cast<float>(i) * 0.37f) * 4.0f;
  const auto top = top_logprobs(logits, 20);
  ASSERT_EQ(top.size(), 20u);
  for (size_t i = 1; i < top.size(); ++i) EXPECT_GE(top[i - 1].second, top[i].second);
  // Nothing outside the list beats its last entry.
  const float last_logit = logits[static_cast<size_t>(top.back().first)];
  int better = 0;
  for (float v : logits) better += v > last_logit;
  EXPECT_LE(better, 19);
}

}  // namespace
}  // namespace tokenmill::sample
