#include "engine/embedding_pool.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace tokenmill::engine {
namespace {

constexpr int64_t kPoolTestEmbd = 5;

// [n, kPoolTestEmbd] rows of random values, from a fixed seed.
std::vector<float> pool_test_rows(int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> dist(0.0f, 2.0f);
  std::vector<float> rows(static_cast<size_t>(n * kPoolTestEmbd));
  for (float& v : rows) v = dist(rng);
  return rows;
}

std::span<const float> pool_rows_at(const std::vector<float>& all, int64_t first, int64_t n) {
  return std::span<const float>(all).subspan(static_cast<size_t>(first * kPoolTestEmbd),
                                             static_cast<size_t>(n * kPoolTestEmbd));
}

// The expected vector, straight from the definition.
std::vector<double> l2_normalised_ref(std::vector<double> v) {
  double n2 = 0;
  for (double x : v) n2 += x * x;
  for (double& x : v) x /= std::sqrt(n2);
  return v;
}

std::vector<double> reference_mean(const std::vector<float>& all, int64_t n) {
  std::vector<double> v(kPoolTestEmbd, 0.0);
  for (int64_t p = 0; p < n; ++p)
    for (int64_t d = 0; d < kPoolTestEmbd; ++d)
      v[static_cast<size_t>(d)] += all[static_cast<size_t>(p * kPoolTestEmbd + d)] / n;
  return l2_normalised_ref(v);
}

void expect_pooled_near(const std::vector<float>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  double n2 = 0;
  for (size_t d = 0; d < got.size(); ++d) {
    EXPECT_NEAR(got[d], want[d], 1e-6) << "dimension " << d;
    n2 += static_cast<double>(got[d]) * got[d];
  }
  EXPECT_NEAR(n2, 1.0, 1e-6);
}

TEST(EmbeddingPoolTest, NamesRoundTrip) {
  for (Pooling p : {Pooling::kMean, Pooling::kLast}) EXPECT_EQ(parse_pooling(pooling_name(p)), p);
  EXPECT_FALSE(parse_pooling("cls").has_value());
  EXPECT_FALSE(parse_pooling("Mean").has_value());
  EXPECT_FALSE(parse_pooling("").has_value());
}

TEST(EmbeddingPoolTest, MeanOverChunksIsTheNormalisedAverage) {
  const std::vector<float> all = pool_test_rows(10, 1);
  EmbeddingPool pool(Pooling::kMean, 10, kPoolTestEmbd);
  EXPECT_TRUE(pool.wants(0, 3));
  pool.add(0, pool_rows_at(all, 0, 3));
  EXPECT_FALSE(pool.complete());
  EXPECT_FALSE(pool.wants(0, 3));  // already pooled
  EXPECT_TRUE(pool.wants(3, 4));
  pool.add(3, pool_rows_at(all, 3, 4));
  pool.add(7, pool_rows_at(all, 7, 3));
  ASSERT_TRUE(pool.complete());
  EXPECT_FALSE(pool.wants(7, 3));
  expect_pooled_near(pool.finish(), reference_mean(all, 10));
}

TEST(EmbeddingPoolTest, MeanIgnoresRecomputedPositions) {
  // A preempted request recomputes from position 0: the repeated positions
  // must not count twice.
  const std::vector<float> all = pool_test_rows(8, 2);
  EmbeddingPool pool(Pooling::kMean, 8, kPoolTestEmbd);
  pool.add(0, pool_rows_at(all, 0, 5));
  EXPECT_TRUE(pool.wants(0, 6));  // position 5 is still missing
  pool.add(0, pool_rows_at(all, 0, 6));
  pool.add(6, pool_rows_at(all, 6, 2));
  expect_pooled_near(pool.finish(), reference_mean(all, 8));
}

TEST(EmbeddingPoolTest, MeanRefusesAGap) {
  const std::vector<float> all = pool_test_rows(8, 3);
  EmbeddingPool pool(Pooling::kMean, 8, kPoolTestEmbd);
  pool.add(0, pool_rows_at(all, 0, 2));
  EXPECT_FALSE(pool.wants(3, 2));
  EXPECT_DEATH(pool.add(3, pool_rows_at(all, 3, 2)), "");
}

TEST(EmbeddingPoolTest, LastTakesOnlyTheLastPosition) {
  const std::vector<float> all = pool_test_rows(9, 4);
  EmbeddingPool pool(Pooling::kLast, 9, kPoolTestEmbd);
  EXPECT_FALSE(pool.wants(0, 8));
  pool.add(0, pool_rows_at(all, 0, 8));  // positions 0..7: nothing taken
  EXPECT_FALSE(pool.complete());
  // A prefix-cache hit may skip the early positions: only the last matters.
  EXPECT_TRUE(pool.wants(6, 3));
  pool.add(6, pool_rows_at(all, 6, 3));
  ASSERT_TRUE(pool.complete());
  EXPECT_FALSE(pool.wants(8, 1));
  std::vector<double> want(all.begin() + 8 * kPoolTestEmbd, all.begin() + 9 * kPoolTestEmbd);
  expect_pooled_near(pool.finish(), l2_normalised_ref(want));
}

TEST(EmbeddingPoolTest, OnePositionAndRowsPastThePrompt) {
  const std::vector<float> all = pool_test_rows(3, 5);
  for (Pooling p : {Pooling::kMean, Pooling::kLast}) {
    EmbeddingPool pool(p, 1, kPoolTestEmbd);
    pool.add(0, pool_rows_at(all, 0, 3));  // rows past the prompt are ignored
    ASSERT_TRUE(pool.complete());
    std::vector<double> want(all.begin(), all.begin() + kPoolTestEmbd);
    expect_pooled_near(pool.finish(), l2_normalised_ref(want));
  }
}

TEST(EmbeddingPoolTest, ZeroVectorStaysZero) {
  const std::vector<float> zeros(2 * kPoolTestEmbd, 0.0f);
  EmbeddingPool pool(Pooling::kMean, 2, kPoolTestEmbd);
  pool.add(0, zeros);
  for (float v : pool.finish()) EXPECT_EQ(v, 0.0f);
}

TEST(EmbeddingPoolTest, FinishBeforeCompleteIsABug) {
  EmbeddingPool pool(Pooling::kMean, 4, kPoolTestEmbd);
  EXPECT_DEATH(pool.finish(), "");
}

}  // namespace
}  // namespace tokenmill::engine
