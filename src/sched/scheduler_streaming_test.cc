// Scheduler under the streaming KV policy (attention sinks + recent window,
// kv/kv_policy.h) and the heavy-hitter one (h2o): a long generation holds a bounded number of blocks and
// leaves the pool free; what every step reads back through the tables is
// exactly the kept tokens (sinks, then the recent window), at the RoPE
// positions the policy promises (the fake model of test_harness.h checks
// both), through chunked prefill, preemption, prefix-cache hits, forks and
// a sliding-window group; a window longer than the sequence changes
// nothing.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "kv/test_policy_cases.h"
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

// Each test runs under streaming and h2o (with room for two blocks of
// heavy hitters past the sinks and the window), keys preserved or
// re-rotated.
class SchedulerStreaming : public ::testing::TestWithParam<kv::testing::PolicyCase> {
 protected:
  static bool h2o() { return GetParam().first == kv::KvPolicyKind::kHeavyHitter; }
  static kv::KvPolicy make_policy(int64_t sinks, int64_t window) {
    if (h2o()) return kv::heavy_hitter_policy(sinks, window, sinks + window + 2 * kStreamBs, GetParam().second);
    return kv::streaming_policy(sinks, window, GetParam().second);
  }
};

// One sequence: a 10-token prompt in chunks of 4, then 200 tokens, with
// sinks 2 (one block) and a window of 9. Before every step it holds at most
// the policy's bound, after the eviction exactly the sink block and the
// blocks reaching back to the window; the evicted count grows by whole
// blocks; the pool ends free and the scheduler counts every eviction.
TEST_P(SchedulerStreaming, LongGenerationHoldsABoundedNumberOfBlocks) {
  const kv::KvPolicy policy = make_policy(2, 9);
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
    if (h2o()) {
      ASSERT_EQ(std::ssize(d.model.mass().get(s->id)), s->num_cached_positions());
    }
    EXPECT_EQ(s->table(0).num_tokens(), s->num_cached_positions()) << "every reserved slot is computed";
    max_held = std::max(max_held, held);
  }
  const Sequence* done = d.finished_seq(1);
  ASSERT_NE(done, nullptr);
  EXPECT_EQ(done->num_output_tokens(), 200);
  EXPECT_GT(done->kv_evicted_total, 150);
  EXPECT_EQ(d.sched.stats().kv_evicted_tokens, done->kv_evicted_total);
  EXPECT_EQ(d.sched.allocator().num_used(), 0);
  // Decoding: sink block + ceil((window - 1) / bs) + 1 blocks + the new
  // one; h2o keeps up to its budget (19 positions: 5 blocks) + the new one.
  EXPECT_LE(max_held, h2o() ? 5 + 1 : 1 + 2 + 1 + 1);
}

// Three sequences of different lengths and a pool too small for any two of
// them to keep everything: the policy keeps them all running (no
// preemption needed), each reads exactly its kept tokens.
TEST_P(SchedulerStreaming, ManySequencesShareASmallPool) {
  Driver d(streaming_config(24, make_policy(4, 8)));
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
  const kv::KvPolicy policy = make_policy(4, 8);
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
  Driver d(streaming_config(64, make_policy(4, 8), 16));
  d.add(make_seq(1, 14, 30, 1, /*first_token=*/100));
  d.run_to_completion();
  const int64_t published = d.sched.prefix_cache().stats().blocks_held;
  EXPECT_GE(published, 3);              // the prompt's full blocks, before any eviction
  EXPECT_LE(published, h2o() ? 8 : 5);  // nothing after the first eviction (h2o: past its budget of 28)
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
  Driver d(streaming_config(64, make_policy(2, 6)));
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
  SchedulerConfig c = streaming_config(64, make_policy(4, 12));
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

INSTANTIATE_TEST_SUITE_P(Policies, SchedulerStreaming, ::testing::ValuesIn(kv::testing::kEvictingPolicyCases),
                         [](const auto& info) { return kv::testing::policy_case_name(info.param); });

// Heavy hitters: before steps of a long generation the test gives each
// full block a distinct mass (1000 x a rank; what the fake model adds per
// step stays far below 1000), so the blocks that survive the step can be
// read off the mass afterwards: exactly the lightest candidates went.
TEST(SchedulerHeavyHitter, EvictsExactlyTheLightestCandidates) {
  for (kv::KvPositions positions : {kv::KvPositions::kPreserve, kv::KvPositions::kRerotate}) {
    const kv::KvPolicy policy = kv::heavy_hitter_policy(0, 8, 8 + 3 * kStreamBs, positions);
    Driver d(streaming_config(64, policy));
    d.add(make_seq(1, 12, 150));
    int64_t checked = 0;
    while (d.sched.has_work()) {
      std::vector<int64_t> rank;  // of each full block, set before the step
      int64_t cached = 0, evicted_before = 0;
      d.sched.for_each_running([&](Sequence& s) {
        cached = s.num_cached_positions();
        evicted_before = s.kv_evicted;
        if (std::ssize(d.model.mass().get(s.id)) != cached) return;
        const std::span<float> mass = d.model.mass().resize(s.id, cached);
        std::fill(mass.begin(), mass.end(), 0.0f);
        for (int64_t b = 0; (b + 1) * kStreamBs <= cached; ++b) {
          rank.push_back((b * 37) % 101 + 1);
          for (int64_t i = 0; i < kStreamBs; ++i)
            mass[static_cast<size_t>(b * kStreamBs + i)] = 1000.0f * static_cast<float>(rank.back()) / kStreamBs;
        }
      });
      d.step();
      const Sequence* s = d.sched.find(1);
      if (s == nullptr || s->kv_evicted == evicted_before || rank.empty()) continue;
      const int64_t gone = (s->kv_evicted - evicted_before) / kStreamBs;
      const int64_t candidates = (cached - policy.window + 1) / kStreamBs;
      std::vector<int64_t> light(rank.begin(), rank.begin() + candidates);
      std::sort(light.begin(), light.end());
      light.resize(static_cast<size_t>(gone));
      std::vector<int64_t> want;  // the survivors' ranks, in order
      for (int64_t r : rank)
        if (std::find(light.begin(), light.end(), r) == light.end()) want.push_back(r);
      const std::span<const float> mass_span = d.model.mass().get(s->id);
      const std::vector<float> mass(mass_span.begin(), mass_span.end());
      std::vector<int64_t> got;
      for (size_t b = 0; b < want.size(); ++b) {
        double m = 0;
        for (size_t i = b * kStreamBs; i < (b + 1) * kStreamBs; ++i) m += mass.at(i);
        got.push_back(std::llround(m / 1000.0));
      }
      EXPECT_EQ(got, want) << "step with " << cached << " cached";
      ++checked;
    }
    EXPECT_GT(checked, 5);
    EXPECT_EQ(d.sched.allocator().num_used(), 0);
    EXPECT_EQ(d.model.mass().num_sequences(), 0u) << "a finished sequence's mass is dropped";
  }
}

// Requests bring their own policies: a full one beside a streaming and an
// h2o one in one pool; each reads back exactly what its own policy keeps
// (the fake model checks), the full one evicts nothing and gives the
// reference tokens, and admission bounds each by its own policy.
TEST(SchedulerHeavyHitter, RequestsBringTheirOwnPolicies) {
  Driver d(streaming_config(64, kv::KvPolicy{}));
  auto streaming = make_seq(1, 10, 120);
  streaming->kv_policy = kv::streaming_policy(4, 8, kv::KvPositions::kRerotate);
  auto h2o = make_seq(2, 12, 120);
  h2o->kv_policy = kv::heavy_hitter_policy(4, 8, 32);
  d.add(std::move(streaming));
  d.add(std::move(h2o));
  d.add(make_seq(3, 9, 60));
  d.run_to_completion();
  ASSERT_EQ(d.finished.size(), 3u);
  EXPECT_GT(d.finished_seq(1)->kv_evicted_total, 0);
  EXPECT_GT(d.finished_seq(2)->kv_evicted_total, 0);
  EXPECT_EQ(d.finished_seq(3)->kv_evicted_total, 0);
  EXPECT_EQ(d.finished_seq(3)->output, reference_generate(d.finished_seq(3)->prompt, 60));
  EXPECT_EQ(d.sched.allocator().num_used(), 0);
  // Under the full server policy a 1000-token request does not fit 64 blocks
  // of 4; with its own streaming policy it does; a bad policy is invalid.
  Scheduler sched(streaming_config(64, kv::KvPolicy{}));
  auto too_long = sched.add(make_seq(4, 10, 1000), TimePoint{});
  ASSERT_NE(too_long, nullptr);
  EXPECT_EQ(too_long->reject_reason, RejectReason::kKvNeverFits);
  auto bounded = make_seq(5, 10, 1000);
  bounded->kv_policy = kv::streaming_policy(4, 8);
  EXPECT_EQ(sched.add(std::move(bounded), TimePoint{}), nullptr);
  auto bad = make_seq(6, 10, 10);
  bad->kv_policy = kv::KvPolicy{kv::KvPolicyKind::kHeavyHitter, 4, 64, kv::KvPositions::kPreserve, 16};
  auto refused = sched.add(std::move(bad), TimePoint{});
  ASSERT_NE(refused, nullptr);
  EXPECT_EQ(refused->reject_reason, RejectReason::kInvalid);
}

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

// Re-rotation keeps every position below the policy's bound, so the model
// context bounds those positions, not the request: a request ten times the
// context runs (prompt longer than the context included), reads back its
// kept tokens at cache-slot positions, and a policy spanning more positions
// than the context is refused.
TEST(SchedulerStreamingSame, RerotationRunsPastTheModelContext) {
  for (const kv::KvPolicy& policy : {kv::streaming_policy(4, 8, kv::KvPositions::kRerotate),
                                     kv::heavy_hitter_policy(4, 8, 24, kv::KvPositions::kRerotate)}) {
    SchedulerConfig c = streaming_config(64, policy);
    c.max_model_len = 40;
    Driver d(c);
    d.add(make_seq(1, 10, 400));
    d.add(make_seq(2, 60, 30));  // a prompt past the context
    d.run_to_completion();
    ASSERT_EQ(d.finished.size(), 2u);
    EXPECT_EQ(d.finished_seq(1)->num_output_tokens(), 400);
    EXPECT_EQ(d.finished_seq(2)->num_output_tokens(), 30);
    EXPECT_EQ(d.sched.allocator().num_used(), 0);
    EXPECT_EQ(max_completion_tokens(c.capacity(), 10, 1), INT64_MAX - 10);
    EXPECT_EQ(default_completion_tokens(c.capacity(), 10, 1), 40);
    c.max_model_len = policy.max_blocks(kStreamBs, 4) * kStreamBs - 1;  // one short of the policy's positions
    Scheduler sched(c);
    auto refused = sched.add(make_seq(3, 10, 100), TimePoint{});
    ASSERT_NE(refused, nullptr);
    EXPECT_EQ(refused->reject_reason, RejectReason::kContextExceeded);
    EXPECT_NE(refused->error.find("spans up to"), std::string::npos) << refused->error;
    EXPECT_EQ(sched.add(make_seq(4, 5, 5), TimePoint{}), nullptr);  // within the context: as before
  }
}

}  // namespace
}  // namespace tokenmill::sched
