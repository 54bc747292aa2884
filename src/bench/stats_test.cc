#include "bench/stats.h"

#include <gtest/gtest.h>

#include <cmath>

namespace tokenmill::bench {
namespace {

// Expected values are numpy.percentile's (linear) by hand: h = (n-1) q.
TEST(Stats, PercentilesInterpolateLikeNumpy) {
  const Summary s = summarize({50, 15, 40, 20, 35});  // sorted: 15 20 35 40 50
  EXPECT_EQ(s.count, 5);
  EXPECT_DOUBLE_EQ(s.mean, 32.0);
  EXPECT_DOUBLE_EQ(s.p50, 35.0);
  EXPECT_NEAR(s.p90, 46.0, 1e-12);  // h = 3.6: 40 + 0.6 * 10
  EXPECT_NEAR(s.p95, 48.0, 1e-12);  // h = 3.8
  EXPECT_NEAR(s.p99, 49.6, 1e-12);  // h = 3.96
  EXPECT_DOUBLE_EQ(s.min, 15.0);
  EXPECT_DOUBLE_EQ(s.max, 50.0);
  EXPECT_NEAR(percentile_sorted({15, 20, 35, 40, 50}, 0.4), 29.0, 1e-12);  // h = 1.6: 20 + 0.6 * 15
}

TEST(Stats, OneToTen) {
  std::vector<double> v;
  for (int i = 10; i >= 1; --i) v.push_back(i);
  const Summary s = summarize(v);
  EXPECT_DOUBLE_EQ(s.p50, 5.5);
  EXPECT_NEAR(s.p90, 9.1, 1e-12);
  EXPECT_NEAR(s.p95, 9.55, 1e-12);
  EXPECT_NEAR(s.p99, 9.91, 1e-12);
}

TEST(Stats, NanDroppedEmptyAndSingle) {
  const Summary e = summarize({NAN, NAN});
  EXPECT_EQ(e.count, 0);
  const Summary one = summarize({NAN, 7.0});
  EXPECT_EQ(one.count, 1);
  EXPECT_DOUBLE_EQ(one.p99, 7.0);
  EXPECT_DOUBLE_EQ(one.p50, 7.0);
  EXPECT_DOUBLE_EQ(percentile_sorted({1, 2}, 1.0), 2.0);
  EXPECT_DOUBLE_EQ(percentile_sorted({1, 2}, 0.0), 1.0);
}

TEST(Stats, TailOfALargeUniformSample) {
  // 0..999: p99 = 989.01 exactly (h = 989.01).
  std::vector<double> v;
  for (int i = 0; i < 1000; ++i) v.push_back(i);
  EXPECT_NEAR(summarize(v).p99, 989.01, 1e-9);
}

TEST(Stats, PercentileOfUnsortedSamplesAndSafeRatio) {
  EXPECT_DOUBLE_EQ(percentile({3, 1, 2}, 0.5), 2.0);
  EXPECT_DOUBLE_EQ(percentile({4, 1, 3, 2}, 0.5), 2.5);  // interpolated, as summarize()
  EXPECT_DOUBLE_EQ(percentile({4, 1, 3, 2}, 1.0), 4.0);
  EXPECT_DOUBLE_EQ(percentile({}, 0.99), 0.0);
  EXPECT_DOUBLE_EQ(ratio_or_zero(3, 2), 1.5);
  EXPECT_DOUBLE_EQ(ratio_or_zero(3, 0), 0.0);
  EXPECT_DOUBLE_EQ(ratio_or_zero(3, -1), 0.0);
}

}  // namespace
}  // namespace tokenmill::bench
