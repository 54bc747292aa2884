// Scheduler with two KV groups (sliding-window layers in their own pool):
// the window table stays bounded while a sequence grows to many windows,
// generation matches the reference through chunked prefill, preemption and
// prefix-cache hits, and both pools end free; parallel-sample forks share
// both groups' blocks copy-on-write and admission counts every sample's
// window.
#include <gtest/gtest.h>

#include <algorithm>

#include "sched/scheduler.h"
#include "sched/test_harness.h"
#include "util/error.h"

namespace tokenmill::sched {
namespace {

using sched_test::Driver;
using sched_test::make_seq;
using sched_test::reference_generate;

constexpr int64_t kWindow = 8;
constexpr int32_t kBs = 4;

SchedulerConfig windowed(int32_t num_blocks, int32_t num_window_blocks, int64_t prefill_chunk) {
  SchedulerConfig c;
  c.kv_groups = {{num_blocks, 0}};
  c.block_size = kBs;
  c.max_batch_tokens = 16;
  c.max_seqs = 4;
  c.prefill_chunk = prefill_chunk;
  c.kv_groups.push_back({num_window_blocks, kWindow});
  return c;
}

TEST(SchedulerWindow, ConfigNeedsBothFieldsAndRoomForOneSequence) {
  SchedulerConfig c = windowed(64, 32, 4);
  EXPECT_EQ(c.blocks_per_seq(1), (kWindow - 1 + 4 + kBs - 1) / kBs + 1);  // 4
  EXPECT_NO_THROW(c.validate());
  c.kv_groups[1].num_blocks = 3;
  EXPECT_THROW(c.validate(), Error);
  c.kv_groups[1].num_blocks = 8;
  c.kv_groups[1].window = -1;
  EXPECT_THROW(c.validate(), Error);
  c.kv_groups[1].window = 0;  // a second group without a window is allowed
  EXPECT_NO_THROW(c.validate());
  c.kv_groups[0].window = kWindow;  // group 0 must hold every position
  EXPECT_THROW(c.validate(), Error);
}

// One sequence decodes 100 tokens past a 6-token prompt (over 13 windows):
// while decoding its window table never holds more than
// ceil(window / block_size) + 1 = 3 blocks, and the window pool's used count
// says the same, while the full-attention table grows with the sequence.
TEST(SchedulerWindow, DecodingHoldsAtMostTheWindowPlusOneBlock) {
  Driver d(windowed(64, 16, 4));
  d.add(make_seq(1, 6, 100));
  const int64_t bound = (kWindow + kBs - 1) / kBs + 1;
  int64_t max_held = 0;
  while (d.sched.has_work()) {
    d.step();
    const Sequence* s = d.sched.find(1);
    if (s == nullptr) break;
    const kv::BlockAllocator& w = d.sched.allocator(1);
    if (!s->output.empty()) {  // decoding
      ASSERT_LE(static_cast<int64_t>(s->table(1).blocks().size()), bound) << s->num_tokens();
      ASSERT_LE(w.num_used(), bound);
      max_held = std::max<int64_t>(max_held, w.num_used());
    }
    EXPECT_EQ(d.sched.allocator().num_used(), static_cast<int32_t>((s->num_computed_tokens + kBs - 1) / kBs))
        << "the full-attention table keeps every position";
    EXPECT_EQ(s->table(1).num_tokens(), s->table(0).num_tokens());
  }
  EXPECT_EQ(max_held, bound);  // the bound is reached, not just respected
  const Sequence* done = d.finished_seq(1);
  ASSERT_NE(done, nullptr);
  EXPECT_EQ(done->output, reference_generate(done->prompt, 100));
  EXPECT_EQ(d.sched.allocator(1).num_used(), 0);
  EXPECT_EQ(d.sched.stats().kv_window_blocks_total, 16);
  EXPECT_LE(d.sched.stats().kv_window_blocks_high_water, (kWindow - 1 + 4 + kBs - 1) / kBs + 1);
}

// A full-attention pool that holds only two of three long sequences forces
// preemptions; recomputes hit the prefix cache (which needs the window
// blocks before the hit) and everything matches the reference.
TEST(SchedulerWindow, PreemptionAndPrefixHitsKeepOutputsExact) {
  Driver d(windowed(24, 24, 5));
  d.add(make_seq(1, 11, 30, 1, /*first_token=*/100));
  d.add(make_seq(2, 12, 30));
  d.add(make_seq(3, 13, 30));
  d.add(make_seq(4, 11, 20, 1, /*first_token=*/100));  // request 1's prompt
  d.run_to_completion();
  ASSERT_EQ(d.finished.size(), 4u);
  for (const auto& s : d.finished) {
    EXPECT_EQ(s->finish_reason, FinishReason::kLength);
    EXPECT_EQ(s->output, reference_generate(s->prompt, s->max_tokens)) << s->id;
  }
  EXPECT_GT(d.sched.stats().num_preemptions, 0);
  EXPECT_GT(d.sched.stats().prefix_cache.hit_tokens, 0);
  EXPECT_EQ(d.sched.allocator().num_used(), 0);
  EXPECT_EQ(d.sched.allocator(1).num_used(), 0);
}

// A second request with the same long prompt hits the cached prefix: its
// window table starts at the block holding the first position the next
// token attends, not at block 0.
TEST(SchedulerWindow, PrefixHitAdoptsOnlyTheWindowBlocks) {
  Driver d(windowed(64, 32, 8));
  d.add(make_seq(1, 30, 2, 1, /*first_token=*/100));
  d.run_to_completion();
  d.add(make_seq(2, 30, 2, 1, /*first_token=*/100));
  d.step();
  const Sequence* s = d.sched.find(2);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->num_cached_prompt_tokens, 28);  // 7 full blocks; the last token is computed
  // Position 28 attends 21..28: logical blocks 5.. are held.
  EXPECT_EQ(s->table(1).first_block(), 5);
  d.run_to_completion();
  EXPECT_EQ(d.finished_seq(2)->output, d.finished_seq(1)->output);
}

// A 14-token prompt in chunks of 4, forked into 3 samples. The last chunk
// (positions 12-13) ran after the window table dropped logical block 0, so
// the forks share window blocks 1-3 (first_block 1, each referenced 3
// times) and full blocks 0-3. The first decode writes the shared,
// half-filled block 3 of both groups: two copies in each pool (the third
// sample writes in place). A fork cancelled later and the others finishing
// leave both pools empty, and every token is the reference's.
TEST(SchedulerWindow, ForksShareBothGroupsCopyOnWrite) {
  Driver d(windowed(64, 32, 4));
  auto s = make_seq(1, 14, 20);
  s->fork_ids = {2, 3};
  d.add(std::move(s));
  for (int i = 0; i < 4; ++i) d.step();
  ASSERT_EQ(d.sched.num_running(), 3);
  const Sequence* parent = d.sched.find(1);
  ASSERT_NE(parent, nullptr);
  EXPECT_EQ(parent->table(1).first_block(), 1);
  EXPECT_EQ(parent->table(1).blocks().size(), 3u);
  const kv::BlockAllocator& w = d.sched.allocator(1);
  for (uint64_t id : {2u, 3u}) {
    const Sequence* f = d.sched.find(id);
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->table(1).blocks(), parent->table(1).blocks());
    EXPECT_EQ(f->table(1).first_block(), 1);
    EXPECT_EQ(f->table(1).num_tokens(), 14);
    EXPECT_EQ(f->table(0).blocks(), parent->table(0).blocks());
  }
  for (kv::BlockId b : parent->table(1).blocks()) EXPECT_EQ(w.ref_count(b), 3);
  for (kv::BlockId b : parent->table(0).blocks()) EXPECT_EQ(d.sched.allocator().ref_count(b), 3);
  EXPECT_EQ(w.num_used(), 3);

  ScheduledBatch batch = d.sched.schedule(d.now);
  EXPECT_EQ(batch.seqs.size(), 3u);
  EXPECT_EQ(batch.copies[0].size(), 2u);
  EXPECT_EQ(batch.copies[1].size(), 2u);
  EXPECT_EQ(w.num_used(), 5);
  const auto sampled = d.model.run(batch);
  for (auto& f : d.sched.commit(batch, sampled, d.now)) d.finished.push_back(std::move(f));
  for (int i = 0; i < 6; ++i) d.step();
  d.sched.cancel(2);
  d.run_to_completion();
  ASSERT_EQ(d.finished.size(), 3u);
  EXPECT_EQ(d.finished_seq(2)->finish_reason, FinishReason::kCancelled);
  for (uint64_t id : {1u, 3u}) EXPECT_EQ(d.finished_seq(id)->finish_reason, FinishReason::kLength);
  for (const auto& f : d.finished) d.expect_reference(*f);
  EXPECT_EQ(d.sched.allocator().num_used(), 0);
  EXPECT_EQ(w.num_used(), 0);
}

// An 8-block window pool: one sequence needs at most 4 (a chunk of 4 after
// a window of 8), a decoding one 3. Three samples decoding at once need 9
// and can never run together; two (6) can, and so can three short ones
// (1 block each).
TEST(SchedulerWindow, ParallelSamplesMustFitTheWindowPoolTogether) {
  Driver d(windowed(64, 8, 4));
  auto three = make_seq(1, 10, 20);
  three->fork_ids = {2, 3};
  std::unique_ptr<Sequence> r = d.sched.add(std::move(three), d.now);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->reject_reason, RejectReason::kKvNeverFits);
  EXPECT_NE(r->error.find("window"), std::string::npos) << r->error;
  auto two = make_seq(4, 10, 20);
  two->fork_ids = {5};
  d.add(std::move(two));
  auto short_three = make_seq(6, 2, 3);
  short_three->fork_ids = {7, 8};
  d.add(std::move(short_three));
  d.run_to_completion();
  EXPECT_EQ(d.finished.size(), 5u);
  for (const auto& f : d.finished) {
    EXPECT_EQ(f->finish_reason, FinishReason::kLength);
    d.expect_reference(*f);
  }
  EXPECT_EQ(d.sched.allocator(1).num_used(), 0);
  EXPECT_EQ(d.sched.allocator().num_used(), 0);
}

}  // namespace
}  // namespace tokenmill::sched
