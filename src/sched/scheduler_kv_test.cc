// Scheduler under KV pressure: each on_kv_exhausted policy in a hand-worked
// scenario, forks of parallel samples, and a randomized stress run
// (arrivals, priorities, shared prefixes, parallel-sample forks, cancels,
// deadlines) per policy, with one KV pool or two (sliding-window group),
// that checks every generated token against the reference, every block's
// refcount in both pools after every step, and that the pools end fully free.
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "sched/scheduler.h"
#include "sched/test_harness.h"

namespace tokenmill::sched {
namespace {

using sched_test::Driver;
using sched_test::Entry;
using sched_test::make_seq;
using sched_test::reference_generate;

SchedulerConfig small_pool(int32_t num_blocks, KvExhaustedPolicy policy, int32_t max_seqs = 4) {
  SchedulerConfig c;
  c.kv_groups = {{num_blocks, 0}};
  c.block_size = 4;
  c.max_batch_tokens = 64;
  c.max_seqs = max_seqs;
  c.on_kv_exhausted = policy;
  c.enable_prefix_cache = false;
  return c;
}

void expect_all_reference(const Driver& d) {
  for (const auto& s : d.finished) {
    if (s->finish_reason != FinishReason::kLength && s->finish_reason != FinishReason::kStop) continue;
    EXPECT_EQ(s->output, reference_generate(s->prompt, s->num_output_tokens())) << "request " << s->id;
  }
}

// Three sequences fill a 3-block pool; at step 2 each needs a second block.
// H (class 0) gets one by preempting the lowest-ranked newest, L2; then L1,
// now last in rank, preempts itself. Both resume later and produce exactly
// the reference tokens.
TEST(SchedulerKv, PreemptPicksLowestPriorityNewestAndResumesIdentically) {
  Driver d(small_pool(3, KvExhaustedPolicy::kPreempt));
  d.add(make_seq(1, 4, 4, /*priority=*/1));  // L1
  d.add(make_seq(2, 4, 4, /*priority=*/1));  // L2
  d.add(make_seq(3, 4, 4, /*priority=*/0));  // H
  EXPECT_EQ(d.step(), (std::vector<Entry>{{3, 0, 4, true, false}, {1, 0, 4, true, false}, {2, 0, 4, true, false}}));
  ScheduledBatch batch = d.sched.schedule(d.now);
  ASSERT_EQ(batch.seqs.size(), 1u);
  EXPECT_EQ(batch.seqs[0].seq->id, 3u);
  ASSERT_EQ(batch.preempted.size(), 2u);
  EXPECT_EQ(batch.preempted[0]->id, 2u);
  EXPECT_EQ(batch.preempted[1]->id, 1u);
  EXPECT_EQ(batch.preempted[1]->status, SequenceStatus::kPreempted);
  EXPECT_EQ(batch.preempted[1]->output.size(), 1u);  // generated tokens are kept
  EXPECT_EQ(batch.preempted[1]->num_computed_tokens, 0);
  d.sched.commit(batch, d.model.run(batch), d.now);
  d.run_to_completion();
  EXPECT_EQ(d.finished.size(), 3u);
  for (uint64_t id = 1; id <= 3; ++id) {
    const Sequence* s = d.finished_seq(id);
    ASSERT_NE(s, nullptr);
    EXPECT_EQ(s->finish_reason, FinishReason::kLength);
    EXPECT_EQ(s->output, reference_generate(s->prompt, 4)) << id;
  }
  EXPECT_EQ(d.finished_seq(1)->num_preemptions, 1);
  EXPECT_EQ(d.sched.stats().num_preemptions, 2);
  EXPECT_EQ(d.sched.allocator().num_used(), 0);
  EXPECT_EQ(d.sched.stats().kv_blocks_high_water, 3);
}

// A resumed sequence recomputes prompt + output as one prefill, which its own
// published blocks (prefix cache) cut short.
TEST(SchedulerKv, RecomputeAfterPreemptionHitsThePrefixCache) {
  SchedulerConfig c = small_pool(5, KvExhaustedPolicy::kPreempt);
  c.enable_prefix_cache = true;
  Driver d(c);
  d.add(make_seq(1, 8, 8, 0));  // 15 slots: 4 blocks
  d.add(make_seq(2, 8, 5, 1));  // 12 slots: 3 blocks
  d.run_to_completion();
  expect_all_reference(d);
  ASSERT_EQ(d.finished.size(), 2u);
  EXPECT_GE(d.finished_seq(2)->num_preemptions, 1);
  EXPECT_GT(d.sched.stats().prefix_cache.hit_tokens, 0);
  EXPECT_EQ(d.sched.allocator().num_used(), 0);
  EXPECT_EQ(d.sched.allocator().num_available(), 5);
}

// kQueue: a sequence that cannot grow waits (no preemption) and no new
// prefill is admitted while it waits.
TEST(SchedulerKv, QueueStallsInsteadOfPreempting) {
  Driver d(small_pool(3, KvExhaustedPolicy::kQueue));
  d.add(make_seq(1, 4, 4));
  d.add(make_seq(2, 4, 4));
  d.add(make_seq(3, 4, 1));  // finishes in its prefill step
  EXPECT_EQ(d.step().size(), 3u);
  d.add(make_seq(4, 1, 1));
  // One block is free again: 1 takes it, 2 stalls, 4 is not admitted.
  EXPECT_EQ(d.step(), (std::vector<Entry>{{1, 4, 1, true, true}}));
  EXPECT_EQ(d.step(), (std::vector<Entry>{{1, 5, 1, true, true}}));
  EXPECT_EQ(d.step(), (std::vector<Entry>{{1, 6, 1, true, true}}));  // 1 finishes
  EXPECT_EQ(d.step(), (std::vector<Entry>{{2, 4, 1, true, true}, {4, 0, 1, true, false}}));
  d.run_to_completion();
  EXPECT_EQ(d.sched.stats().num_preemptions, 0);
  EXPECT_EQ(d.finished.size(), 4u);
  expect_all_reference(d);
}

// When every running sequence is stalled, the lowest-ranked one is
// preempted so the rest proceed (any policy).
TEST(SchedulerKv, QueueBreaksATotalStallByPreemptingTheLowestRanked) {
  Driver d(small_pool(3, KvExhaustedPolicy::kQueue));
  d.add(make_seq(1, 4, 4));
  d.add(make_seq(2, 4, 4));
  d.add(make_seq(3, 4, 4));
  d.step();
  EXPECT_EQ(d.step(), (std::vector<Entry>{{1, 4, 1, true, true}}));
  EXPECT_EQ(d.num_preempted, 1);
  EXPECT_EQ(d.sched.find(3)->status, SequenceStatus::kPreempted);
  d.run_to_completion();
  EXPECT_EQ(d.finished.size(), 3u);
  expect_all_reference(d);
}

// kReject: add() refuses prompts whose blocks are not available now, and a
// stall rejects queued sequences that have not started.
TEST(SchedulerKv, RejectSheds) {
  Driver d(small_pool(5, KvExhaustedPolicy::kReject, /*max_seqs=*/2));
  d.add(make_seq(1, 8, 4));  // 2 blocks now, 3 at most
  d.add(make_seq(2, 8, 4));
  d.add(make_seq(3, 4, 1));  // 1 block: the last one not claimed by queued prompts
  auto rejected = d.sched.add(make_seq(4, 1, 1), d.now);
  ASSERT_NE(rejected, nullptr);
  EXPECT_EQ(rejected->reject_reason, RejectReason::kKvExhausted);
  EXPECT_NE(rejected->error.find("KV cache is exhausted"), std::string::npos) << rejected->error;
  EXPECT_EQ(d.step(), (std::vector<Entry>{{1, 0, 8, true, false}, {2, 0, 8, true, false}}));
  // 1 takes the last block, 2 stalls: 3 (never started) is rejected.
  EXPECT_EQ(d.step(), (std::vector<Entry>{{1, 8, 1, true, true}}));
  const Sequence* s3 = d.finished_seq(3);
  ASSERT_NE(s3, nullptr);
  EXPECT_EQ(s3->finish_reason, FinishReason::kRejected);
  EXPECT_EQ(s3->reject_reason, RejectReason::kKvExhausted);
  d.run_to_completion();
  EXPECT_EQ(d.finished_seq(2)->finish_reason, FinishReason::kLength);
  EXPECT_EQ(d.sched.stats().num_rejections, 2);
  EXPECT_EQ(d.sched.stats().num_preemptions, 0);
  expect_all_reference(d);
}

// A 6-token prompt (one full block of 4 and a half-filled one) forked into
// 3 samples: the prefill runs once, the forks share both blocks, and the
// first decode step copies the shared half-filled block for two of them
// (the third writes it in place).
TEST(SchedulerKv, ForksShareThePromptBlocksCopyOnWrite) {
  SchedulerConfig c = small_pool(16, KvExhaustedPolicy::kPreempt, /*max_seqs=*/4);
  Driver d(c);
  auto s = make_seq(1, 6, 4);
  s->fork_ids = {2, 3};
  d.add(std::move(s));
  EXPECT_EQ(d.step(), (std::vector<Entry>{{1, 0, 6, true, false}}));
  EXPECT_EQ(d.sched.num_running(), 3);
  const Sequence* parent = d.sched.find(1);
  ASSERT_NE(parent, nullptr);
  for (uint64_t id : {2u, 3u}) {
    const Sequence* f = d.sched.find(id);
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->table(0).blocks(), parent->table(0).blocks());
    EXPECT_EQ(f->num_computed_tokens, 6);
    EXPECT_EQ(f->output.size(), 1u);
    EXPECT_NE(f->output[0], parent->output[0]);
  }
  for (kv::BlockId b : parent->table(0).blocks()) EXPECT_EQ(d.sched.allocator().ref_count(b), 3);
  EXPECT_EQ(d.sched.allocator().num_used(), 2);
  ScheduledBatch batch = d.sched.schedule(d.now);
  EXPECT_EQ(batch.seqs.size(), 3u);
  EXPECT_EQ(batch.copies[0].size(), 2u);  // the half-filled block, for two of the three
  EXPECT_EQ(d.sched.allocator().num_used(), 4);
  const auto sampled = d.model.run(batch);
  for (auto& f : d.sched.commit(batch, sampled, d.now)) d.finished.push_back(std::move(f));
  d.sched.cancel(3);
  d.run_to_completion();
  ASSERT_EQ(d.finished.size(), 3u);
  EXPECT_EQ(d.finished_seq(3)->finish_reason, FinishReason::kCancelled);
  for (uint64_t id : {1u, 2u}) EXPECT_EQ(d.finished_seq(id)->finish_reason, FinishReason::kLength);
  for (const auto& f : d.finished) d.expect_reference(*f);
  EXPECT_EQ(d.sched.allocator().num_used(), 0);
}

TEST(SchedulerKv, ForksNeedSlotsAndBlocksForEverySample) {
  Driver d(small_pool(16, KvExhaustedPolicy::kPreempt, /*max_seqs=*/2));
  auto s = make_seq(1, 6, 4);
  s->fork_ids = {2, 3};  // 3 samples > max_seqs
  auto r = d.sched.add(std::move(s), d.now);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->reject_reason, RejectReason::kInvalid);
  // 8 + 30 tokens: 2 shared prompt blocks + 2 x (10 - 2) > 16 blocks.
  auto big = make_seq(4, 8, 30);
  big->fork_ids = {5};
  r = d.sched.add(std::move(big), d.now);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->reject_reason, RejectReason::kKvNeverFits);
  // A pending fork can be dropped before the prefill completes.
  auto two = make_seq(6, 6, 2);
  two->fork_ids = {7};
  d.add(std::move(two));
  EXPECT_TRUE(d.sched.drop_fork(6, 7));
  EXPECT_FALSE(d.sched.drop_fork(6, 7));
  d.run_to_completion();
  EXPECT_EQ(d.finished.size(), 1u);
  EXPECT_EQ(d.sched.allocator().num_used(), 0);
}

struct StressCase {
  KvExhaustedPolicy policy;
  bool prefix_cache;
  int64_t prefill_chunk;
  int64_t window = 0;  // > 0: two KV groups with this sliding window
  int32_t num_window_blocks = 0;
};

struct StressTotals {
  int64_t preemptions = 0, hits = 0, added = 0, ended = 0, forks = 0;
};

// Every block's refcount is exactly its number of appearances in the
// tables of the sequences the scheduler holds (forks share blocks; the
// prefix cache holds no references of its own), and the ledger adds up; in
// both pools with two KV groups (window tables counted in the window pool).
void expect_exact_refcounts(const kv::BlockAllocator& a, const Driver& d, uint64_t max_id, bool window) {
  std::vector<int32_t> refs(static_cast<size_t>(a.num_blocks()), 0);
  for (uint64_t id = 1; id < max_id; ++id) {
    if (const Sequence* s = d.sched.find(id)) {
      for (kv::BlockId b : s->table(window ? 1 : 0).blocks()) ++refs[static_cast<size_t>(b)];
    }
  }
  for (kv::BlockId b = 0; b < a.num_blocks(); ++b) {
    ASSERT_EQ(a.ref_count(b), refs[static_cast<size_t>(b)]) << (window ? "window block " : "block ") << b;
  }
  EXPECT_EQ(a.num_free() + a.num_evictable() + a.num_used(), a.num_blocks());
}

void expect_exact_refcounts(const Driver& d, uint64_t max_id) {
  expect_exact_refcounts(d.sched.allocator(), d, max_id, false);
  if (d.sched.num_groups() > 1) expect_exact_refcounts(d.sched.allocator(1), d, max_id, true);
}

// One seeded run: ~200 arrivals over 400 steps (random prompt lengths,
// half sharing a 12-token prefix, 10% with deadlines), random cancels, then
// steps until everything ended.
void run_stress(const StressCase& p, uint32_t seed, StressTotals& totals) {
  SchedulerConfig c;
  c.kv_groups = {{16, 0}};
  c.block_size = 4;
  c.max_batch_tokens = 32;
  c.max_seqs = 6;
  c.prefill_chunk = p.prefill_chunk;
  c.on_kv_exhausted = p.policy;
  c.enable_prefix_cache = p.prefix_cache;
  c.priority_aging_s = 0.02;
  if (p.window > 0) c.kv_groups.push_back({p.num_window_blocks, p.window});
  Driver d(c);
  std::mt19937 rng(seed);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const std::vector<int32_t> shared_prefix = make_seq(999, 12, 1)->prompt;
  uint64_t next_id = 1;
  std::map<uint64_t, uint64_t> fork_parent;  // fork id -> its parent
  for (int step = 0; step < 400 || d.sched.has_work(); ++step) {
    ASSERT_LT(step, 5000) << "no progress";
    if (step < 400 && pick(0, 1) == 0) {
      auto s = make_seq(next_id++, pick(1, 20), pick(1, 24), pick(0, 2));
      if (pick(0, 1) == 0) {
        const size_t n = std::min(s->prompt.size(), shared_prefix.size());
        std::copy_n(shared_prefix.begin(), n, s->prompt.begin());
      }
      if (pick(0, 9) == 0) s->deadline = d.now + std::chrono::milliseconds(pick(1, 30));
      if (pick(0, 3) == 0) {  // parallel samples: 2 or 3 forks of one prefill
        const uint64_t parent = s->id;
        for (int k = pick(1, 2); k > 0; --k) {
          fork_parent[next_id] = parent;
          s->fork_ids.push_back(next_id++);
        }
      }
      totals.added += s->num_samples();
      if (auto r = d.sched.add(std::move(s), d.now)) {
        EXPECT_EQ(r->finish_reason, FinishReason::kRejected);
        totals.ended += r->num_samples();  // its forks were never made
      }
    }
    if (pick(0, 30) == 0 && next_id > 1) {
      const uint64_t id = static_cast<uint64_t>(pick(1, static_cast<int>(next_id - 1)));
      // A fork not made yet is dropped from its parent instead.
      if (!d.sched.cancel(id) && fork_parent.count(id) && d.sched.drop_fork(fork_parent[id], id)) ++totals.ended;
    }
    d.step();
    expect_exact_refcounts(d, next_id);
    if (::testing::Test::HasFailure()) return;
  }
  totals.ended += static_cast<int64_t>(d.finished.size());
  for (const auto& s : d.finished) {
    totals.ended += static_cast<int64_t>(s->fork_ids.size());  // ended before its prefill completed
    totals.forks += d.is_fork(s->id) ? 1 : 0;
    // Whatever the ending, every generated token is the reference's.
    d.expect_reference(*s);
    if (s->finish_reason == FinishReason::kLength) {
      EXPECT_EQ(s->num_output_tokens(), s->max_tokens);
    }
    EXPECT_TRUE(s->table(0).empty());
  }
  EXPECT_EQ(d.sched.stats().num_running, 0);
  EXPECT_EQ(d.sched.allocator().num_used(), 0);
  EXPECT_EQ(d.sched.allocator().num_available(), c.kv_groups[0].num_blocks);
  if (p.window > 0) {
    for (const auto& s : d.finished) EXPECT_TRUE(s->table(1).empty());
    EXPECT_EQ(d.sched.allocator(1).num_used(), 0);
    EXPECT_EQ(d.sched.allocator(1).num_available(), c.kv_groups[1].num_blocks);
  }
  totals.preemptions += d.sched.stats().num_preemptions;
  totals.hits += d.sched.stats().prefix_cache.hit_tokens;
}

class SchedulerStress : public ::testing::TestWithParam<StressCase> {};

TEST_P(SchedulerStress, RandomTrafficMatchesReferenceAndLeaksNothing) {
  const StressCase& p = GetParam();
  StressTotals totals;
  for (uint32_t seed = 1; seed <= 6; ++seed) {
    SCOPED_TRACE(seed);
    run_stress(p, seed, totals);
    if (HasFailure()) return;
  }
  EXPECT_EQ(totals.ended, totals.added);
  EXPECT_GT(totals.forks, 0) << "no fork ran";
  if (p.policy == KvExhaustedPolicy::kPreempt) {
    EXPECT_GT(totals.preemptions, 0) << "the pool was never short";
  }
  if (p.prefix_cache) {
    EXPECT_GT(totals.hits, 0);
  } else {
    EXPECT_EQ(totals.hits, 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Policies, SchedulerStress,
                         ::testing::Values(StressCase{KvExhaustedPolicy::kPreempt, true, 0},
                                           StressCase{KvExhaustedPolicy::kPreempt, false, 5},
                                           StressCase{KvExhaustedPolicy::kPreempt, true, 5},
                                           StressCase{KvExhaustedPolicy::kQueue, true, 5},
                                           StressCase{KvExhaustedPolicy::kQueue, false, 0},
                                           StressCase{KvExhaustedPolicy::kReject, true, 5},
                                           StressCase{KvExhaustedPolicy::kReject, false, 0},
                                           // Two KV groups; the window pools are tight so that they
                                           // run dry too (the minimum for chunk 5 is 4 or 5 blocks).
                                           StressCase{KvExhaustedPolicy::kPreempt, true, 5, 6, 10},
                                           StressCase{KvExhaustedPolicy::kPreempt, false, 5, 9, 8},
                                           StressCase{KvExhaustedPolicy::kPreempt, true, 0, 6, 14},
                                           StressCase{KvExhaustedPolicy::kQueue, true, 5, 3, 9},
                                           StressCase{KvExhaustedPolicy::kReject, true, 5, 6, 12}));

}  // namespace
}  // namespace tokenmill::sched
