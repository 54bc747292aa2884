#include "bench/arrival.h"

#include <gtest/gtest.h>

#include <cmath>

namespace tokenmill::bench {
namespace {

TEST(Rng, SameSeedSameSequenceAndKnownFirstValue) {
  Rng a(42), b(42), c(43);
  const uint64_t first = a.next_u64();
  EXPECT_EQ(first, b.next_u64());
  EXPECT_NE(first, c.next_u64());
  // SplitMix64(0) first output is the published constant 0xE220A8397B1DCDAF.
  uint64_t s = 0;
  EXPECT_EQ(splitmix64(s), 0xE220A8397B1DCDAFull);
}

TEST(Rng, UniformIntCoversRangeEvenly) {
  Rng rng(7);
  int counts[5] = {0};
  const int n = 50000;
  for (int i = 0; i < n; ++i) ++counts[rng.uniform_int(3, 7) - 3];
  for (int c : counts) EXPECT_NEAR(c, n / 5, 4 * std::sqrt(n * 0.2 * 0.8));  // 4 sigma
}

TEST(Arrival, PoissonRateAndExponentialGaps) {
  Rng rng(1);
  const ArrivalParams p{ArrivalKind::kPoisson, 5.0, {}};
  const std::vector<double> t = arrival_times(p, 20000, 0, rng);
  ASSERT_EQ(t.size(), 20000u);
  // Rate: n / span within 3% (the relative sd of the span is 1/sqrt(n) = 0.7%).
  EXPECT_NEAR(static_cast<double>(t.size()) / t.back(), 5.0, 0.15);
  // Exponential gaps: the coefficient of variation is 1, and P(gap > mean) = e^-1.
  double sum = 0, sq = 0;
  int above = 0;
  for (size_t i = 1; i < t.size(); ++i) {
    const double g = t[i] - t[i - 1];
    sum += g;
    sq += g * g;
    above += g > 0.2;
  }
  const double n = static_cast<double>(t.size() - 1);
  const double mean = sum / n, sd = std::sqrt(sq / n - mean * mean);
  EXPECT_NEAR(sd / mean, 1.0, 0.03);
  EXPECT_NEAR(above / n, std::exp(-1.0), 0.01);
}

TEST(Arrival, BurstWindowsRunAtFactorTimesTheRate) {
  Rng rng(2);
  const ArrivalParams p{ArrivalKind::kPoissonWithBurst, 4.0, BurstParams{5.0, 2.0, 10.0}};
  const double duration = 4000;  // 400 periods
  const std::vector<double> t = arrival_times(p, 1 << 30, duration, rng);
  double in_burst = 0, outside = 0;
  for (double x : t) (std::fmod(x, 10.0) < 2.0 ? in_burst : outside) += 1;
  // Expected: 800 s of burst at 20/s = 16000; 3200 s at 4/s = 12800.
  EXPECT_NEAR(in_burst / 800.0, 20.0, 20.0 * 0.03);
  EXPECT_NEAR(outside / 3200.0, 4.0, 4.0 * 0.03);
  EXPECT_LT(t.back(), duration);
  EXPECT_DOUBLE_EQ(arrival_rate_at(p, 1.0), 20.0);
  EXPECT_DOUBLE_EQ(arrival_rate_at(p, 12.5), 4.0);
  EXPECT_DOUBLE_EQ(arrival_rate_at(p, 21.99), 20.0);
}

TEST(Arrival, ConstantIsEvenlySpacedAndClosedLoopHasNoSchedule) {
  Rng rng(3);
  const std::vector<double> t = arrival_times({ArrivalKind::kConstant, 4.0, {}}, 5, 0, rng);
  ASSERT_EQ(t.size(), 5u);
  for (size_t i = 0; i < t.size(); ++i) EXPECT_DOUBLE_EQ(t[i], 0.25 * static_cast<double>(i));
  EXPECT_EQ(arrival_times({ArrivalKind::kConstant, 4.0, {}}, 100, 1.0, rng).size(), 4u);  // 0, .25, .5, .75
  EXPECT_TRUE(arrival_times({ArrivalKind::kClosedLoop, 4.0, {}}, 100, 0, rng).empty());
}

TEST(Arrival, SameSeedSameTimes) {
  const ArrivalParams p{ArrivalKind::kPoissonWithBurst, 3.0, BurstParams{}};
  Rng a(99), b(99);
  EXPECT_EQ(arrival_times(p, 500, 0, a), arrival_times(p, 500, 0, b));
}

}  // namespace
}  // namespace tokenmill::bench
