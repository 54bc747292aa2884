#include "router/load.h"

#include <gtest/gtest.h>

#include <vector>

namespace tokenmill::router {
namespace {

TEST(RouterLoad, MeanTokensIsOneWhenIdle) {
  const std::vector<LoadInputs> idle(3);
  EXPECT_DOUBLE_EQ(mean_request_tokens(idle), 1.0);
}

TEST(RouterLoad, FormulaCountsRequestsQueueAndTokens) {
  // Two replicas: A runs 2 requests of 100 tokens, B runs 2 of 300 tokens
  // and has 3 queued. mean_tokens = 800 / 4 = 200.
  const std::vector<LoadInputs> r = {{0, 2, 200}, {3, 2, 600}};
  const double mean = mean_request_tokens(r);
  EXPECT_DOUBLE_EQ(mean, 200.0);
  EXPECT_DOUBLE_EQ(replica_load(r[0], mean), 0 + 0.5 * 2 + 0.5 * 200 / 200.0);  // 2
  EXPECT_DOUBLE_EQ(replica_load(r[1], mean), 3 + 0.5 * 2 + 0.5 * 600 / 200.0);  // 5.5
}

TEST(RouterLoad, EqualRequestsCountOneEach) {
  const std::vector<LoadInputs> r = {{0, 4, 400}, {0, 1, 100}, {0, 0, 0}};
  const double mean = mean_request_tokens(r);
  EXPECT_DOUBLE_EQ(replica_load(r[0], mean), 4.0);
  EXPECT_DOUBLE_EQ(replica_load(r[1], mean), 1.0);
  EXPECT_DOUBLE_EQ(replica_load(r[2], mean), 0.0);
}

TEST(RouterLoad, BoundIsSlackTimesMeanOfUsablePlusOne) {
  const std::vector<double> loads = {2, 4, 100};
  const std::vector<char> usable = {1, 1, 0};  // the down one does not count
  EXPECT_DOUBLE_EQ(load_bound(loads, usable, 0.25), 1.25 * 3 + 1);
  EXPECT_DOUBLE_EQ(load_bound(loads, std::vector<char>{0, 0, 0}, 0.25), 1.0);
}

// A ring of 3 and a key, with the order its walk visits the members.
struct RingCase {
  HashRing ring{{"a", "b", "c"}, 32};
  uint64_t key = hash_bytes("some prompt");
  std::vector<int> order = ring.walk(key);
};

TEST(RouterLoad, AffinityKeepsTheOwnerUnderTheBound) {
  RingCase c;
  std::vector<double> loads = {0, 0, 0};
  loads[static_cast<size_t>(c.order[0])] = 1;  // bound = 1.25 * 1/3 + 1 = 1.42
  const Pick p = pick_affinity(c.ring, c.key, loads, std::vector<char>{1, 1, 1}, 0.25);
  EXPECT_EQ(p.replica, c.order[0]);
  EXPECT_TRUE(p.preferred);
}

TEST(RouterLoad, AffinityWalksPastAnOverloadedOwner) {
  RingCase c;
  std::vector<double> loads = {0, 0, 0};
  loads[static_cast<size_t>(c.order[0])] = 6;  // bound = 1.25 * 2 + 1 = 3.5
  loads[static_cast<size_t>(c.order[1])] = 0;
  Pick p = pick_affinity(c.ring, c.key, loads, std::vector<char>{1, 1, 1}, 0.25);
  EXPECT_EQ(p.replica, c.order[1]);
  EXPECT_FALSE(p.preferred);
  // The next one over the bound too: the walk goes on to the third.
  loads[static_cast<size_t>(c.order[1])] = 5;  // mean 11/3, bound 5.58: order[1] fits
  p = pick_affinity(c.ring, c.key, loads, std::vector<char>{1, 1, 1}, 0.25);
  EXPECT_EQ(p.replica, c.order[1]);
  loads[static_cast<size_t>(c.order[0])] = 10;
  loads[static_cast<size_t>(c.order[1])] = 10;  // mean 6.67, bound 9.33: only order[2] (load 0) fits
  p = pick_affinity(c.ring, c.key, loads, std::vector<char>{1, 1, 1}, 0.25);
  EXPECT_EQ(p.replica, c.order[2]);
}

TEST(RouterLoad, AffinitySkipsDownReplicasAndFailsWithNone) {
  RingCase c;
  const std::vector<double> loads = {0, 0, 0};
  std::vector<char> usable = {1, 1, 1};
  usable[static_cast<size_t>(c.order[0])] = 0;
  Pick p = pick_affinity(c.ring, c.key, loads, usable, 0.25);
  EXPECT_EQ(p.replica, c.order[1]);
  EXPECT_TRUE(p.preferred);  // the first usable one is the key's own now
  p = pick_affinity(c.ring, c.key, loads, std::vector<char>{0, 0, 0}, 0.25);
  EXPECT_EQ(p.replica, -1);
}

TEST(RouterLoad, AffinityWithZeroSlackStillFindsAReplica) {
  RingCase c;
  const std::vector<double> loads = {7, 7, 7};  // every load equals the mean: all fit
  const Pick p = pick_affinity(c.ring, c.key, loads, std::vector<char>{1, 1, 1}, 0.0);
  EXPECT_EQ(p.replica, c.order[0]);
}

TEST(RouterLoad, LeastLoadPicksTheMinimumAndRotatesTies) {
  const std::vector<char> usable = {1, 1, 1};
  EXPECT_EQ(pick_least_load(std::vector<double>{3, 1, 2}, usable, 0), 1);
  EXPECT_EQ(pick_least_load(std::vector<double>{3, 1, 2}, usable, 2), 1);
  const std::vector<double> tie = {0, 0, 0};
  EXPECT_EQ(pick_least_load(tie, usable, 0), 0);
  EXPECT_EQ(pick_least_load(tie, usable, 1), 1);
  EXPECT_EQ(pick_least_load(tie, usable, 5), 2);
  EXPECT_EQ(pick_least_load(std::vector<double>{3, 1, 2}, std::vector<char>{1, 0, 1}, 0), 2);
  EXPECT_EQ(pick_least_load(tie, std::vector<char>{0, 0, 0}, 0), -1);
}

TEST(RouterLoad, RoundRobinSkipsDownReplicas) {
  const std::vector<char> usable = {1, 0, 1};
  std::vector<int> picks;
  for (uint64_t c = 0; c < 6; ++c) picks.push_back(pick_round_robin(usable, c));
  EXPECT_EQ(picks, (std::vector<int>{0, 2, 0, 2, 0, 2}));
  EXPECT_EQ(pick_round_robin(std::vector<char>{0, 0}, 3), -1);
}

}  // namespace
}  // namespace tokenmill::router
