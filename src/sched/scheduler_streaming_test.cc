// Scheduler under the streaming KV policy (attention sinks + recent window,
// kv/kv_policy.h): a long generation holds a bounded number of blocks and
// leaves the pool free; what every step reads back through the tables is
// exactly the kept tokens (sinks, then the recent window), at the RoPE
// positions the policy promises (the fake model of test_harness.h checks
// both), through chunked prefill, preemption, prefix-cache hits, forks and
// a sliding-window group; a window longer than the sequence changes
// nothing.
#include <gtest/gtest.h>

#include <algorithm>

#include "sched/admission.h"
#include "sched/scheduler.h"
#include "sched/test_harness.h"
#include "util/error.h"

namespace tokenmill::sched {
namespace {

using sched_test::Driver;
using sched_test::Entry;
using sched_test::make_seq;
using sched_test::reference_generate;

constexpr int32_t kStreamBs = 4;

SchedulerConfig streaming_config(int32_t num_blocks, const kv::KvPolicy& policy, int64_t prefill_chunk = 4) {
  SchedulerConfig c;
  c.kv_groups = {{num_blocks, 0}};
  c.block_size = kStreamBs;
  c.max_batch_tokens = 16;
  c.max_seqs = 4;
  c.prefill_chunk = prefill_chunk;
  c.kv_policy = policy;
  return c;
}

class SchedulerStreaming : public ::testing::TestWithParam<kv::KvPositions> {};

// One sequence: a 10-token prompt in chunks of 4, then 200 tokens, with
// sinks 2 (one block) and a window of 9. Before every step it holds at most
// the policy's bound, after the eviction exactly the sink block and the
// blocks reaching back to the window; the evicted count grows by whole
// blocks; the pool ends free and the scheduler counts every eviction.
TEST_P(SchedulerStreaming, LongGenerationHoldsABoundedNumberOfBlocks) {
  const kv::KvPolicy policy = kv::streaming_policy(2, 9, GetParam());
  Driver d(streaming_config(64, policy));
  d.add(make_seq(1, 10, 200));
  const int64_t bound = policy.max_blocks(kStreamBs, 4);
  int64_t max_held = 0;
  while (d.sched.has_work()) {
    d.step();
    const Sequence* s = d.sched.find(1);
    if (s == nullptr) break;
    const int64_t held = std::ssize(s->table(0).blocks());
    ASSERT_LE(held, bound) << s->num_tokens();
    ASSERT_EQ(d.sched.allocator().num_used(), held);
    ASSERT_EQ(s->kv_evicted % kStreamBs, 0);
    EXPECT_EQ(s->table(0).num_tokens(), s->num_cached_positions()) << "every reserved slot is computed";
    max_held = std::max(max_held, held);
  }
  const Sequence* done = d.finished_seq(1);
  ASSERT_NE(done, nullptr);
  EXPECT_EQ(done->num_output_tokens(), 200);
  EXPECT_GT(done->kv_evicted_total, 150);
  EXPECT_EQ(d.sched.stats().kv_evicted_tokens, done->kv_evicted_total);
  EXPECT_EQ(d.sched.allocator().num_used(), 0);
  // Decoding: sink block + ceil((window - 1) / bs) + 1 blocks + the new one.
  EXPECT_LE(max_held, 1 + 2 + 1 + 1);
}

// Three sequences of different lengths and a pool too small for any two of
// them to keep everything: the policy keeps them all running (no
// preemption needed), each reads exactly its kept tokens.
TEST_P(SchedulerStreaming, ManySequencesShareASmallPool) {
  Driver d(streaming_config(24, kv::streaming_policy(4, 8, GetParam())));
  d.add(make_seq(1, 13, 60));
  d.add(make_seq(2, 3, 90));
  d.add(make_seq(3, 21, 40));
  d.run_to_completion();
  ASSERT_EQ(d.finished.size(), 3u);
  for (const auto& s : d.finished) {
    EXPECT_EQ(s->finish_reason, FinishReason::kLength) << s->id;
    EXPECT_GT(s->kv_evicted_total, 0) << s->id;
  }
  EXPECT_EQ(d.sched.stats().num_preemptions, 0);
  EXPECT_EQ(d.sched.allocator().num_used(), 0);
}

// A pool that holds only one sequence's policy blocks: the others are
// preempted and recompute from their first token, evicting again as they
// go; every read is still exact and the pool ends free.
TEST_P(SchedulerStreaming, PreemptionRecomputesUnderThePolicy) {
  const kv::KvPolicy policy = kv::streaming_policy(4, 8, GetParam());
  SchedulerConfig c = streaming_config(static_cast<int32_t>(policy.max_blocks(kStreamBs, 4)) + 2, policy);
  Driver d(c);
  d.add(make_seq(1, 9, 40));
  d.add(make_seq(2, 11, 40));
  d.add(make_seq(3, 10, 40));
  d.run_to_completion();
  ASSERT_EQ(d.finished.size(), 3u);
  for (const auto& s : d.finished) EXPECT_EQ(s->finish_reason, FinishReason::kLength) << s->id;
  EXPECT_GT(d.sched.stats().num_preemptions, 0);
  EXPECT_EQ(d.sched.allocator().num_used(), 0);
}

// The prefix cache: a sequence publishes its blocks until its first
// eviction and none after (its later blocks are no longer the prefix); a
// second request with the same prompt hits the published blocks, which stay
// intact (under kRerotate its moved copies are private), and a third gets
// the same tokens as the second.
TEST_P(SchedulerStreaming, PrefixHitsShareOnlyBlocksPublishedBeforeEviction) {
  Driver d(streaming_config(64, kv::streaming_policy(4, 8, GetParam()), 16));
  d.add(make_seq(1, 14, 30, 1, /*first_token=*/100));
  d.run_to_completion();
  const int64_t published = d.sched.prefix_cache().stats().blocks_held;
  EXPECT_GE(published, 3);  // the prompt's full blocks, before any eviction
  EXPECT_LE(published, 5);  // nothing after the first eviction
  d.add(make_seq(2, 14, 30, 1, /*first_token=*/100));
  d.add(make_seq(3, 14, 30, 1, /*first_token=*/100));
  d.run_to_completion();
  ASSERT_EQ(d.finished.size(), 3u);
  EXPECT_GT(d.finished_seq(2)->num_cached_prompt_tokens, 0);
  EXPECT_EQ(d.finished_seq(2)->output, d.finished_seq(1)->output);
  EXPECT_EQ(d.finished_seq(3)->output, d.finished_seq(1)->output);
  EXPECT_EQ(d.sched.allocator().num_used(), 0);
}

// Parallel samples fork after the prompt: the forks share the parent's
// blocks and each evicts on its own (copies of shared blocks under
// kRerotate); all read exactly their own kept tokens.
TEST_P(SchedulerStreaming, ForksEvictIndependently) {
  Driver d(streaming_config(64, kv::streaming_policy(2, 6, GetParam())));
  auto s = make_seq(1, 14, 40);
  s->fork_ids = {2, 3};
  d.add(std::move(s));
  d.run_to_completion();
  ASSERT_EQ(d.finished.size(), 3u);
  for (const auto& f : d.finished) EXPECT_GT(f->kv_evicted_total, 0) << f->id;
  EXPECT_EQ(d.sched.allocator().num_used(), 0);
}

// With a sliding-window group beside the full one (gemma3): both groups
// evict the same cache blocks, the window group's bound holds, and the
// window reads stay exact.
TEST_P(SchedulerStreaming, AWindowGroupEvictsAlongside) {
  SchedulerConfig c = streaming_config(64, kv::streaming_policy(4, 12, GetParam()));
  c.kv_groups.push_back({32, 6});
  Driver d(c);
  d.add(make_seq(1, 10, 80));
  d.add(make_seq(2, 5, 50));
  d.run_to_completion();
  ASSERT_EQ(d.finished.size(), 2u);
  EXPECT_EQ(d.sched.allocator().num_used(), 0);
  EXPECT_EQ(d.sched.allocator(1).num_used(), 0);
  EXPECT_GT(d.sched.stats().kv_evicted_tokens, 0);
}

INSTANTIATE_TEST_SUITE_P(Positions, SchedulerStreaming,
                         ::testing::Values(kv::KvPositions::kPreserve, kv::KvPositions::kRerotate),
                         [](const auto& info) { return std::string(kv::kv_positions_name(info.param)); });

// A window at least as long as the sequence evicts nothing: the same
// steps, the same tokens (the reference's) as the full policy.
TEST(SchedulerStreamingSame, AWindowLongerThanTheSequenceChangesNothing) {
  auto run = [](const kv::KvPolicy& policy) {
    Driver d(streaming_config(64, policy));
    d.add(make_seq(1, 10, 40));
    d.add(make_seq(2, 23, 30));
    std::vector<std::vector<Entry>> steps;
    while (d.sched.has_work()) steps.push_back(d.step());
    for (const auto& s : d.finished) EXPECT_EQ(s->output, reference_generate(s->prompt, s->max_tokens));
    EXPECT_EQ(d.sched.stats().kv_evicted_tokens, 0);
    return steps;
  };
  EXPECT_EQ(run(kv::streaming_policy(4, 64)), run(kv::KvPolicy{}));
}

// Under kRerotate the blocks after an eviction move and are rotated; the
// forks share them, so each fork's first eviction copies the shared ones
// before rotating its own (the harness would see a rotation of a block the
// other fork reads). Under kPreserve nothing is rotated and only the
// written last block is ever copied.
TEST(SchedulerStreamingSame, RerotationCopiesSharedBlocksFirst) {
  auto run = [](kv::KvPositions positions) {
    Driver d(streaming_config(64, kv::streaming_policy(2, 6, positions)));
    auto s = make_seq(1, 17, 12);
    s->fork_ids = {2};
    d.add(std::move(s));
    d.run_to_completion();
    EXPECT_EQ(d.finished.size(), 2u);
    EXPECT_EQ(d.sched.allocator().num_used(), 0);
    return std::make_pair(d.num_copies, d.num_key_shifts);
  };
  const auto [preserve_copies, preserve_shifts] = run(kv::KvPositions::kPreserve);
  const auto [rerotate_copies, rerotate_shifts] = run(kv::KvPositions::kRerotate);
  EXPECT_EQ(preserve_shifts, 0);
  EXPECT_GT(rerotate_shifts, 0);
  EXPECT_GT(rerotate_copies, preserve_copies);
}

// Admission: under the policy a request longer than the whole pool fits
// (it never holds more than the policy's blocks), but not one whose
// policy blocks exceed it.
TEST(SchedulerStreamingSame, AdmissionBoundsThePoolByThePolicy) {
  const kv::KvPolicy policy = kv::streaming_policy(4, 8);
  SchedulerConfig c = streaming_config(16, policy);
  CapacityLimits l = c.capacity();
  EXPECT_FALSE(never_fits(l, 10, 1000, 1).has_value());
  l.kv_policy = {};
  EXPECT_TRUE(never_fits(l, 10, 1000, 1).has_value());
  EXPECT_EQ(max_completion_tokens(c.capacity(), 10, 1), INT64_MAX - 10);
  c.kv_groups[0].num_blocks = static_cast<int32_t>(policy.max_blocks(kStreamBs, 4)) - 1;
  EXPECT_THROW(c.validate(), Error);
  c.max_model_len = 100;
  c.kv_groups[0].num_blocks = 64;
  Scheduler sched(c);
  auto rejected = sched.add(make_seq(1, 10, 200), TimePoint{});
  ASSERT_NE(rejected, nullptr);  // the model context still bounds a request
  EXPECT_EQ(rejected->reject_reason, RejectReason::kContextExceeded);
}

}  // namespace
}  // namespace tokenmill::sched
