// Scheduler admission bounds: the waiting bound counts only what cannot
// start now; per-tenant running, waiting and prefix-cache limits; and the
// prefix-cache outcome reported for every prompt token at first admission.
#include <gtest/gtest.h>

#include <numeric>

#include "sched/scheduler.h"
#include "sched/test_harness.h"
#include "util/error.h"

namespace tokenmill::sched {
namespace {

using sched_test::config;
using sched_test::Driver;
using sched_test::Entry;
using sched_test::make_seq;
using sched_test::reference_generate;

std::unique_ptr<Sequence> tenant_seq(uint64_t id, std::string tenant, int64_t prompt_len = 3, int64_t max_tokens = 4) {
  auto s = make_seq(id, prompt_len, max_tokens);
  s->tenant = std::move(tenant);
  return s;
}

// Adds `n` sequences from id `first`; returns how many were accepted and
// checks that the others were refused kQueueFull.
int add_burst(Scheduler& s, uint64_t first, int n, const std::string& tenant = "") {
  int accepted = 0;
  for (int i = 0; i < n; ++i) {
    std::unique_ptr<Sequence> r = s.add(tenant_seq(first + i, tenant), TimePoint{});
    if (r == nullptr) {
      ++accepted;
    } else {
      EXPECT_EQ(r->reject_reason, RejectReason::kQueueFull) << r->error;
    }
  }
  return accepted;
}

TEST(QueueBound, ABurstFillsTheFreeSlotsPlusMaxWaiting) {
  SchedulerConfig c = config(256, 4, 64, 8);
  c.max_waiting = 4;
  Driver d(c);
  EXPECT_EQ(add_burst(d.sched, 1, 40), 12);  // min(40, 8 + 4)
  EXPECT_EQ(d.step().size(), 8u);
  EXPECT_EQ(d.sched.num_waiting(), 4);
  std::unique_ptr<Sequence> r = d.sched.add(make_seq(100, 3, 4), d.now);
  ASSERT_NE(r, nullptr);
  EXPECT_NE(r->error.find("waiting queue is full"), std::string::npos) << r->error;
  d.run_to_completion();
  EXPECT_EQ(d.finished.size(), 12u);
}

TEST(QueueBound, PendingForksTakeTheirSlots) {
  SchedulerConfig c = config(256, 4, 64, 8);
  c.max_waiting = 2;
  Driver d(c);
  auto parent = make_seq(1, 3, 4);
  parent->fork_ids = {101, 102};
  d.add(std::move(parent));
  d.step();                                  // 3 slots taken: 5 free
  EXPECT_EQ(add_burst(d.sched, 10, 10), 7);  // 5 + 2
}

// Tenant "a" may run 2: its third waits while "b"'s, behind it, runs.
TEST(TenantLimits, MaxRunningPassesOverWithoutBlockingOthers) {
  SchedulerConfig c = config(256, 4, 64, 8);
  c.tenants.tenants["a"].max_running = 2;
  Driver d(c);
  d.add(tenant_seq(1, "a", 3, 2));
  d.add(tenant_seq(2, "a"));
  d.add(tenant_seq(3, "a"));
  d.add(tenant_seq(4, "b"));
  EXPECT_EQ(d.step(), (std::vector<Entry>{{1, 0, 3, true, false}, {2, 0, 3, true, false}, {4, 0, 3, true, false}}));
  EXPECT_EQ(d.step(), (std::vector<Entry>{{1, 3, 1, true, true}, {2, 3, 1, true, true}, {4, 3, 1, true, true}}));
  // 1 finished: 3 starts.
  EXPECT_EQ(d.step(), (std::vector<Entry>{{2, 4, 1, true, true}, {4, 4, 1, true, true}, {3, 0, 3, true, false}}));
  d.run_to_completion();
  EXPECT_EQ(d.finished.size(), 4u);

  auto samples = tenant_seq(5, "a");
  samples->fork_ids = {51, 52};  // 3 samples can never run under max_running 2
  std::unique_ptr<Sequence> r = d.sched.add(std::move(samples), d.now);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->reject_reason, RejectReason::kInvalid);
  EXPECT_NE(r->error.find("max_running"), std::string::npos) << r->error;
}

// max_waiting per tenant, beyond the tenant's free slots (the global ones,
// capped by its max_running); the default applies to each other tenant alone.
TEST(TenantLimits, MaxWaitingRefusesNamingTheTenant) {
  SchedulerConfig c = config(256, 4, 64, 2);
  c.tenants.defaults.max_waiting = 1;
  c.tenants.tenants["a"] = TenantLimits{.max_running = 1, .max_waiting = 1};
  Scheduler s(c);
  EXPECT_EQ(add_burst(s, 1, 5, "a"), 2);   // 1 + min(1, 2) free
  EXPECT_EQ(add_burst(s, 10, 5, "x"), 3);  // 1 + 2 free
  EXPECT_EQ(add_burst(s, 20, 5, ""), 3);   // the empty tenant is one of its own
  std::unique_ptr<Sequence> r = s.add(tenant_seq(30, "a"), TimePoint{});
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->reject_reason, RejectReason::kQueueFull);
  EXPECT_NE(r->error.find("tenant \"a\""), std::string::npos) << r->error;
  EXPECT_NE(r->error.find("max_waiting"), std::string::npos) << r->error;
}

TEST(TenantLimits, NegativeLimitsAreRefusedByName) {
  SchedulerConfig c = config(64, 4, 64, 2);
  c.tenants.tenants["acme"].max_prefix_blocks = -1;
  try {
    Scheduler s(c);
    FAIL() << "accepted a negative limit";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tenant_limits[\"acme\"].max_prefix_blocks"), std::string::npos) << e.what();
  }
  c.tenants.tenants.clear();
  c.tenants.defaults.max_running = -2;
  EXPECT_THROW(Scheduler{c}, Error);
}

// Tenant "a" may keep 2 published blocks: its first prompt publishes 2 of
// its 4 (the rest would exceed the bound while a holds them); the next
// prompt of "a" replaces them, oldest first; "b"'s 4 are never touched.
TEST(TenantLimits, MaxPrefixBlocksEvictsTheTenantsOwnBlocksOnly) {
  SchedulerConfig c = config(64, 4, 64, 4);
  c.enable_prefix_cache = true;
  c.tenants.tenants["a"].max_prefix_blocks = 2;
  Driver d(c);
  const kv::PrefixCache& cache = d.sched.prefix_cache();
  d.add(tenant_seq(1, "b", 16, 1));
  d.add(tenant_seq(2, "a", 16, 1));
  d.run_to_completion();
  EXPECT_EQ(cache.owner_blocks(tenant_key("b")), 4);
  EXPECT_EQ(cache.owner_blocks(tenant_key("a")), 2);
  auto again = tenant_seq(3, "a", 16, 1);
  again->prompt = d.finished_seq(2)->prompt;
  d.add(std::move(again));
  d.add(tenant_seq(4, "a", 16, 1));  // another prompt
  d.run_to_completion();
  EXPECT_EQ(d.finished_seq(3)->num_cached_prompt_tokens, 8);  // the two blocks "a" kept
  EXPECT_EQ(cache.owner_blocks(tenant_key("a")), 2);
  EXPECT_EQ(cache.owner_blocks(tenant_key("b")), 4);
  EXPECT_GE(cache.stats().quota_evictions, 2);
  auto b_again = tenant_seq(5, "b", 16, 1);
  b_again->prompt = d.finished_seq(1)->prompt;
  d.add(std::move(b_again));
  d.run_to_completion();
  EXPECT_EQ(d.finished_seq(5)->num_cached_prompt_tokens, 12);  // (16 - 1) / 4 blocks
}

int64_t total(const PrefixLookup& p) {
  return p.hit_tokens + std::accumulate(p.miss_tokens.begin(), p.miss_tokens.end(), int64_t{0});
}

int64_t miss(const PrefixLookup& p, kv::PrefixMissReason r) { return p.miss_tokens[static_cast<size_t>(r)]; }

// Blocks of 4. Request 1 (10 tokens) misses everything: 2 blocks never
// seen, 2 tokens of a partial block. Request 2 (its prompt + 4) hits those
// 2 blocks. Request 3 skips the lookup. Request 4, preempted and readmitted,
// is reported once.
TEST(PrefixLookups, EveryPromptTokenIsAHitOrAMissOnce) {
  SchedulerConfig c = config(64, 4, 64, 4);
  c.enable_prefix_cache = true;
  Driver d(c);
  d.add(tenant_seq(1, "t", 10, 1));
  d.run_to_completion();
  auto second = tenant_seq(2, "t", 0, 1);
  second->prompt = d.finished_seq(1)->prompt;
  second->prompt.insert(second->prompt.end(), {7, 8, 9, 10});
  auto bypass = tenant_seq(3, "u", 0, 1);
  bypass->prompt = second->prompt;
  bypass->skip_prefix_lookup = true;
  d.add(std::move(second));
  d.add(std::move(bypass));
  d.run_to_completion();
  ASSERT_EQ(d.prefix_lookups.size(), 3u);
  const PrefixLookup& p1 = d.prefix_lookups[0];
  EXPECT_EQ(p1.tenant, "t");
  EXPECT_EQ(p1.hit_tokens, 0);
  EXPECT_EQ(miss(p1, kv::PrefixMissReason::kNoOverlap), 8);
  EXPECT_EQ(miss(p1, kv::PrefixMissReason::kPartialBlock), 2);
  const PrefixLookup& p2 = d.prefix_lookups[1];
  EXPECT_EQ(p2.hit_tokens, 8);
  EXPECT_EQ(miss(p2, kv::PrefixMissReason::kNoOverlap), 4);  // block 2: 2 old tokens, 2 new
  EXPECT_EQ(miss(p2, kv::PrefixMissReason::kPartialBlock), 2);
  const PrefixLookup& p3 = d.prefix_lookups[2];
  EXPECT_EQ(p3.tenant, "u");
  EXPECT_EQ(p3.hit_tokens, 0);
  EXPECT_EQ(miss(p3, kv::PrefixMissReason::kLogprobsBypass), 14);
  EXPECT_EQ(total(p1), 10);
  EXPECT_EQ(total(p2), 14);
  EXPECT_EQ(total(p3), 14);
}

TEST(PrefixLookups, AReadmissionIsNotReportedAgain) {
  SchedulerConfig c = config(7, 4, 64, 4);
  Driver d(c);
  d.add(make_seq(1, 8, 16));
  d.add(make_seq(2, 8, 16));
  d.run_to_completion();
  EXPECT_GT(d.num_preempted, 0);
  ASSERT_EQ(d.prefix_lookups.size(), 2u);
  for (const PrefixLookup& p : d.prefix_lookups) {
    EXPECT_EQ(total(p), 8);
    EXPECT_EQ(miss(p, kv::PrefixMissReason::kDisabled), 8);  // the cache is off here
  }
}

}  // namespace
}  // namespace tokenmill::sched
