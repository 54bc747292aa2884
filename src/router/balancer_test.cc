#include "router/balancer.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "util/error.h"

namespace tokenmill::router {
namespace {

std::vector<ReplicaAddress> addresses(int n) {
  std::vector<ReplicaAddress> out;
  for (int i = 0; i < n; ++i) out.push_back(parse_replica_url("http://127.0.0.1:" + std::to_string(9001 + i)));
  return out;
}

RouteInfo route(uint64_t key, int64_t tokens = 100) {
  RouteInfo r;
  r.affinity_key = key;
  r.estimated_tokens = tokens;
  return r;
}

void all_up(Balancer& b) {
  for (size_t i = 0; i < b.size(); ++i) b.replica(i).up.store(true);
}

TEST(Balancer, NothingUpNothingAcquired) {
  Balancer b(addresses(2), {});
  EXPECT_FALSE(b.acquire(route(1), {}).has_value());
}

TEST(Balancer, LeaseCountsInFlightUntilItEnds) {
  Balancer b(addresses(2), {Policy::kRoundRobin});
  all_up(b);
  {
    auto l1 = b.acquire(route(1), {});
    auto l2 = b.acquire(route(1), {});
    ASSERT_TRUE(l1 && l2);
    EXPECT_NE(l1->replica(), l2->replica());
    EXPECT_EQ(b.views()[0].in_flight + b.views()[1].in_flight, 2);
    EXPECT_DOUBLE_EQ(b.views()[0].tokens_in_flight, 100);
  }
  EXPECT_EQ(b.views()[0].in_flight + b.views()[1].in_flight, 0);
  EXPECT_EQ(b.views()[0].routed + b.views()[1].routed, 2);
}

TEST(Balancer, ExcludedAndDownReplicasAreSkipped) {
  Balancer b(addresses(3), {Policy::kAffinity});
  all_up(b);
  b.set_up(1, false, "test");
  for (uint64_t k = 0; k < 50; ++k) {
    const std::vector<int> exclude = {0};
    auto l = b.acquire(route(k * 7919), exclude);
    ASSERT_TRUE(l);
    EXPECT_EQ(l->replica(), 2);
  }
}

TEST(Balancer, LeastLoadSpreadsABurstEvenly) {
  Balancer b(addresses(3), {Policy::kLeastLoad});
  all_up(b);
  std::vector<Balancer::Lease> held;
  for (int i = 0; i < 30; ++i) held.push_back(std::move(*b.acquire(route(i), {})));
  for (const ReplicaView& v : b.views()) EXPECT_EQ(v.in_flight, 10);
}

TEST(Balancer, AffinityHoldsAKeyUntilTheBoundThenDiverts) {
  BalancerOptions o;
  o.policy = Policy::kAffinity;
  o.load_slack = 0.25;
  Balancer b(addresses(2), o);
  all_up(b);
  std::vector<Balancer::Lease> held;
  for (int i = 0; i < 40; ++i) held.push_back(std::move(*b.acquire(route(12345), {})));
  const std::vector<ReplicaView> v = b.views();
  const int owner = v[0].affinity_hits > 0 ? 0 : 1;
  EXPECT_GT(v[static_cast<size_t>(owner)].affinity_hits, 0);
  EXPECT_GT(v[static_cast<size_t>(1 - owner)].affinity_diverted, 0);
  // Bounded load: the owner holds at most (1 + slack) x mean + 1 of the 40.
  EXPECT_LE(v[static_cast<size_t>(owner)].in_flight, static_cast<int64_t>(1.25 * 20 + 1) + 1);
  EXPECT_GE(v[static_cast<size_t>(1 - owner)].in_flight, 40 - 27);
}

TEST(Balancer, AffinityKeepsSequentialRequestsOnOneReplica) {
  Balancer b(addresses(4), {Policy::kAffinity});
  all_up(b);
  const int first = b.acquire(route(777), {})->replica();  // the lease ends at once
  for (int i = 0; i < 20; ++i) EXPECT_EQ(b.acquire(route(777), {})->replica(), first);
}

TEST(Balancer, ConcurrentPicksAndHealthFlipsKeepTheCountsRight) {
  // Workers acquire and release while another thread flips a replica up
  // and down (as the health monitor does): every lease is counted once.
  Balancer b(addresses(3), {Policy::kLeastLoad});
  all_up(b);
  std::atomic<bool> stop{false};
  std::thread flipper([&] {
    for (int i = 0; !stop.load(); ++i) b.set_up(2, i % 2 == 0, "test");
  });
  std::vector<std::thread> workers;
  std::atomic<int64_t> acquired{0};
  for (int w = 0; w < 4; ++w) {
    workers.emplace_back([&, w] {
      for (int i = 0; i < 2000; ++i) {
        auto lease = b.acquire(route(static_cast<uint64_t>(w * 100000 + i)), {});
        if (lease) acquired.fetch_add(1);
      }
    });
  }
  for (std::thread& t : workers) t.join();
  stop.store(true);
  flipper.join();
  int64_t routed = 0;
  for (const ReplicaView& v : b.views()) {
    EXPECT_EQ(v.in_flight, 0);
    EXPECT_DOUBLE_EQ(v.tokens_in_flight, 0);
    routed += v.routed;
  }
  EXPECT_EQ(routed, acquired.load());
  EXPECT_EQ(acquired.load(), 8000);  // replicas 0 and 1 never went down
}

TEST(Balancer, PolicyNames) {
  EXPECT_EQ(parse_policy("affinity"), Policy::kAffinity);
  EXPECT_EQ(parse_policy("least-load"), Policy::kLeastLoad);
  EXPECT_EQ(parse_policy("round-robin"), Policy::kRoundRobin);
  EXPECT_THROW(parse_policy("random"), Error);
  EXPECT_STREQ(policy_name(Policy::kLeastLoad), "least-load");
}

}  // namespace
}  // namespace tokenmill::router
