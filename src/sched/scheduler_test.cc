// Scheduler, table-driven: the exact batches of hand-worked scenarios
// (continuous batching, chunked prefill next to decodes, budgets, priority
// and aging, prefix-cache hits) and the finishing paths (rejection at add,
// deadlines, cancel, stop check, failed batches).
#include "sched/scheduler.h"

#include <gtest/gtest.h>

#include "sched/test_harness.h"
#include "util/error.h"

namespace tokenmill::sched {
namespace {

using sched_test::config;
using sched_test::Driver;
using sched_test::Entry;
using sched_test::expect_reference_output;
using sched_test::make_seq;
using sched_test::reference_generate;
using sched_test::sampled_tokens;
using std::chrono::milliseconds;

TEST(Scheduler, ContinuousBatchingFinishedLeaveAndQueuedJoin) {
  Driver d(config(64, 4, 64, 2));
  d.add(make_seq(1, 3, 2));
  d.add(make_seq(2, 5, 4));
  d.add(make_seq(3, 2, 3));
  EXPECT_EQ(d.step(), (std::vector<Entry>{{1, 0, 3, true, false}, {2, 0, 5, true, false}}));
  EXPECT_EQ(d.sched.num_waiting(), 1);  // max_seqs = 2
  EXPECT_EQ(d.step(), (std::vector<Entry>{{1, 3, 1, true, true}, {2, 5, 1, true, true}}));
  ASSERT_NE(d.finished_seq(1), nullptr);
  EXPECT_EQ(d.finished_seq(1)->finish_reason, FinishReason::kLength);
  EXPECT_EQ(d.step(), (std::vector<Entry>{{2, 6, 1, true, true}, {3, 0, 2, true, false}}));
  EXPECT_EQ(d.step(), (std::vector<Entry>{{2, 7, 1, true, true}, {3, 2, 1, true, true}}));
  EXPECT_EQ(d.step(), (std::vector<Entry>{{3, 3, 1, true, true}}));
  EXPECT_FALSE(d.sched.has_work());
  expect_reference_output(d, 1, 2);
  expect_reference_output(d, 2, 4);
  expect_reference_output(d, 3, 3);
  EXPECT_EQ(d.sched.allocator().num_used(), 0);
  EXPECT_EQ(d.sched.allocator().num_free(), 64);
}

TEST(Scheduler, ChunkedPrefillInterleavesWithDecode) {
  Driver d(config(64, 4, 16, 4, /*prefill_chunk=*/8));
  d.add(make_seq(1, 4, 10));
  d.add(make_seq(2, 30, 2));
  EXPECT_EQ(d.step(), (std::vector<Entry>{{1, 0, 4, true, false}, {2, 0, 8, false, false}}));
  EXPECT_EQ(d.step(), (std::vector<Entry>{{1, 4, 1, true, true}, {2, 8, 8, false, false}}));
  EXPECT_EQ(d.step(), (std::vector<Entry>{{1, 5, 1, true, true}, {2, 16, 8, false, false}}));
  EXPECT_EQ(d.step(), (std::vector<Entry>{{1, 6, 1, true, true}, {2, 24, 6, true, false}}));
  EXPECT_EQ(d.step(), (std::vector<Entry>{{1, 7, 1, true, true}, {2, 30, 1, true, true}}));
  d.run_to_completion();
  expect_reference_output(d, 1, 10);
  expect_reference_output(d, 2, 2);
}

TEST(Scheduler, ChunkIsCutByTheTokenBudget) {
  Driver d(config(64, 4, 8, 2, /*prefill_chunk=*/6));
  d.add(make_seq(1, 20, 1));
  d.add(make_seq(2, 5, 1));
  EXPECT_EQ(d.step(), (std::vector<Entry>{{1, 0, 6, false, false}, {2, 0, 2, false, false}}));
  EXPECT_EQ(d.step(), (std::vector<Entry>{{1, 6, 6, false, false}, {2, 2, 2, false, false}}));
  EXPECT_EQ(d.step(), (std::vector<Entry>{{1, 12, 6, false, false}, {2, 4, 1, true, false}}));
  EXPECT_EQ(d.step(), (std::vector<Entry>{{1, 18, 2, true, false}}));
  EXPECT_FALSE(d.sched.has_work());
  expect_reference_output(d, 1, 1);
  expect_reference_output(d, 2, 1);
}

TEST(Scheduler, WithoutChunkingAPromptWaitsForBudgetAndIsNotOvertaken) {
  Driver d(config(64, 4, 10, 4));
  d.add(make_seq(1, 3, 5));
  d.add(make_seq(2, 9, 1));
  d.add(make_seq(3, 1, 1));
  // Request 2 does not fit the 7 tokens left; request 3 would, but waits behind it.
  EXPECT_EQ(d.step(), (std::vector<Entry>{{1, 0, 3, true, false}}));
  EXPECT_EQ(d.step(), (std::vector<Entry>{{1, 3, 1, true, true}, {2, 0, 9, true, false}}));
  EXPECT_EQ(d.step(), (std::vector<Entry>{{1, 4, 1, true, true}, {3, 0, 1, true, false}}));
  d.run_to_completion();
  expect_reference_output(d, 1, 5);
}

TEST(Scheduler, MaxSeqsAndBudgetBoundEveryStep) {
  Driver d(config(256, 4, 24, 3, /*prefill_chunk=*/5));
  for (uint64_t id = 1; id <= 10; ++id) d.add(make_seq(id, static_cast<int64_t>(id * 3), static_cast<int64_t>(id)));
  const std::vector<Entry> first = d.step();
  EXPECT_EQ(first.size(), 3u);
  // The harness checks budget, max_seqs and running <= max_seqs every step.
  d.run_to_completion();
  EXPECT_EQ(d.finished.size(), 10u);
  for (uint64_t id = 1; id <= 10; ++id) expect_reference_output(d, id, static_cast<int64_t>(id));
}

TEST(Scheduler, PriorityClassesThenFcfs) {
  Driver d(config(64, 4, 64, 1));
  const int priorities[] = {2, 1, 0, 1, 0};
  for (uint64_t id = 1; id <= 5; ++id) d.add(make_seq(id, 2, 1, priorities[id - 1]));
  std::vector<uint64_t> order;
  while (d.sched.has_work()) {
    for (const Entry& e : d.step()) order.push_back(e.id);
  }
  EXPECT_EQ(order, (std::vector<uint64_t>{3, 5, 2, 4, 1}));
}

TEST(Scheduler, RankedListsRunningThenWaitingInServingOrder) {
  Driver d(config(64, 4, 64, 1));
  d.add(make_seq(1, 2, 5, /*priority=*/1));
  d.step();  // 1 runs and holds the only slot
  const int priorities[] = {2, 0, 1};
  for (uint64_t id = 2; id <= 4; ++id) d.add(make_seq(id, 2, 1, priorities[id - 2]));
  const std::vector<RankedSequence> ranked = d.sched.ranked(d.now);
  std::vector<uint64_t> ids;
  std::vector<int> classes;
  for (const RankedSequence& r : ranked) {
    ids.push_back(r.seq->id);
    classes.push_back(r.rank_class);
    EXPECT_EQ(r.running, r.seq->id == 1) << r.seq->id;
  }
  EXPECT_EQ(ids, (std::vector<uint64_t>{1, 3, 4, 2}));
  EXPECT_EQ(classes, (std::vector<int>{1, 0, 1, 2}));
}

TEST(Scheduler, RejectQueuedRefusesOnlyWhatNeverRan) {
  Driver d(config(64, 4, 64, 1));
  d.add(make_seq(1, 2, 5));
  d.step();  // 1 runs
  d.add(make_seq(2, 2, 1));
  EXPECT_TRUE(d.sched.reject_queued(2, RejectReason::kSloUnattainable, "too late"));
  EXPECT_TRUE(d.sched.reject_queued(1, RejectReason::kSloUnattainable, "too late"));  // running: left alone
  EXPECT_FALSE(d.sched.reject_queued(99, RejectReason::kSloUnattainable, "unknown"));
  d.step();
  ASSERT_EQ(d.finished.size(), 1u);
  EXPECT_EQ(d.finished[0]->id, 2u);
  EXPECT_EQ(d.finished[0]->finish_reason, FinishReason::kRejected);
  EXPECT_EQ(d.finished[0]->reject_reason, RejectReason::kSloUnattainable);
  EXPECT_EQ(d.finished[0]->error, "too late");
  EXPECT_NE(d.sched.find(1), nullptr);
}

// One low-priority request against a new high-priority arrival every step
// (each runs one step, max_seqs = 1). Returns the step at which the low one
// ran, or -1 if it never did within 50 steps.
int low_priority_start_step(double aging_s) {
  SchedulerConfig c = config(64, 4, 64, 1);
  c.priority_aging_s = aging_s;
  Driver d(c);
  d.add(make_seq(100, 2, 1, /*priority=*/2));
  for (int k = 0; k < 50; ++k) {
    d.add(make_seq(1000 + k, 2, 1, /*priority=*/0));
    for (const Entry& e : d.step(milliseconds(1))) {
      if (e.id == 100) return k;
    }
  }
  return -1;
}

TEST(Scheduler, AgingLetsLowPriorityRunUnderConstantHighPriorityLoad) {
  EXPECT_EQ(low_priority_start_step(0.0), -1);  // starves without aging
  // 5 ms per class: two classes after 10 ms; then FCFS puts it first.
  EXPECT_EQ(low_priority_start_step(0.005), 10);
}

TEST(Scheduler, PrefixCacheHitsSkipCachedTokens) {
  SchedulerConfig c = config(64, 4, 64, 4);
  c.enable_prefix_cache = true;
  Driver d(c);
  d.add(make_seq(1, 10, 3, 1, /*first_token=*/500));
  EXPECT_EQ(d.step(), (std::vector<Entry>{{1, 0, 10, true, false}}));
  // While 1 decodes, 2 (same prompt) reuses its two full blocks: (10 - 1) / 4 = 2.
  d.add(make_seq(2, 10, 3, 1, 500));
  EXPECT_EQ(d.step(), (std::vector<Entry>{{1, 10, 1, true, true}, {2, 8, 2, true, false}}));
  const Sequence* s2 = d.sched.find(2);
  ASSERT_NE(s2, nullptr);
  EXPECT_EQ(s2->num_cached_prompt_tokens, 8);
  EXPECT_EQ(s2->table(0).blocks()[0], d.sched.find(1)->table(0).blocks()[0]);
  // Another namespace (e.g. another tenant) shares nothing.
  auto s3 = make_seq(3, 10, 3, 1, 500);
  s3->cache_namespace = 42;
  d.add(std::move(s3));
  EXPECT_EQ(d.step(), (std::vector<Entry>{{1, 11, 1, true, true}, {2, 10, 1, true, true}, {3, 0, 10, true, false}}));
  d.run_to_completion();
  for (uint64_t id = 1; id <= 3; ++id) expect_reference_output(d, id, 3);
  const kv::PrefixCacheStats st = d.sched.stats().prefix_cache;
  EXPECT_EQ(st.lookups, 3);
  EXPECT_EQ(st.hit_tokens, 8);
  EXPECT_EQ(st.miss_tokens, 10 + 2 + 10);
  EXPECT_EQ(d.sched.allocator().num_used(), 0);
  EXPECT_EQ(d.sched.allocator().num_available(), 64);
}

TEST(Scheduler, OnlyComputedBlocksAreShared) {
  SchedulerConfig c = config(64, 4, 64, 4, /*prefill_chunk=*/6);
  c.enable_prefix_cache = true;
  Driver d(c);
  d.add(make_seq(1, 16, 1, 1, 500));
  EXPECT_EQ(d.step(), (std::vector<Entry>{{1, 0, 6, false, false}}));
  // Request 1 has computed block 0 and half of block 1 (whose tokens are all
  // known), so request 2 reuses block 0 and nothing more.
  d.add(make_seq(2, 16, 1, 1, 500));
  EXPECT_EQ(d.step(), (std::vector<Entry>{{1, 6, 6, false, false}, {2, 4, 6, false, false}}));
  d.run_to_completion();
  expect_reference_output(d, 1, 1);
  expect_reference_output(d, 2, 1);
}

TEST(Scheduler, ABlockWhoseLastTokenIsOnlySampledIsNotShared) {
  SchedulerConfig c = config(64, 4, 64, 4);
  c.enable_prefix_cache = true;
  Driver d(c);
  d.add(make_seq(1, 7, 5, 1, 500));
  d.step();
  // Tokens 4..7 of request 1 are known (7 is its first output) but the K/V
  // of position 7 is not computed yet: only block 0 may be reused.
  auto two = make_seq(2, 0, 1);
  two->prompt = d.sched.find(1)->all_tokens();
  two->prompt.insert(two->prompt.end(), {1, 2});
  d.add(std::move(two));
  EXPECT_EQ(d.step(), (std::vector<Entry>{{1, 7, 1, true, true}, {2, 4, 6, true, false}}));
  d.run_to_completion();
  expect_reference_output(d, 1, 5);
  expect_reference_output(d, 2, 1);
}

TEST(Scheduler, AddRejectsWhatCanNeverRun) {
  SchedulerConfig c = config(4, 4, 16, 4);
  c.max_waiting = 3;
  Scheduler s(c);
  const TimePoint now{};
  // 8 + 9 tokens: the last is never computed, so 16 slots = 4 blocks fit.
  EXPECT_EQ(s.add(make_seq(1, 8, 9), now), nullptr);
  auto too_long = s.add(make_seq(2, 8, 10), now);
  ASSERT_NE(too_long, nullptr);
  EXPECT_EQ(too_long->status, SequenceStatus::kFinished);
  EXPECT_EQ(too_long->finish_reason, FinishReason::kRejected);
  EXPECT_EQ(too_long->reject_reason, RejectReason::kKvNeverFits);
  EXPECT_NE(too_long->error.find("needs 5 KV blocks"), std::string::npos) << too_long->error;
  EXPECT_EQ(s.add(make_seq(3, 0, 4), now)->reject_reason, RejectReason::kInvalid);
  EXPECT_EQ(s.add(make_seq(4, 2, 0), now)->reject_reason, RejectReason::kInvalid);
  EXPECT_EQ(s.add(make_seq(1, 2, 2), now)->reject_reason, RejectReason::kInvalid);  // duplicate id
  EXPECT_EQ(s.add(make_seq(5, 2, 2, /*priority=*/-1), now)->reject_reason, RejectReason::kInvalid);
  // max_waiting 3 beyond the 4 free sequence slots: 7 may wait.
  for (uint64_t id = 6; id < 12; ++id) EXPECT_EQ(s.add(make_seq(id, 2, 2), now), nullptr);
  auto full = s.add(make_seq(12, 2, 2), now);
  ASSERT_NE(full, nullptr);
  EXPECT_EQ(full->reject_reason, RejectReason::kQueueFull);
  EXPECT_NE(full->error.find("waiting queue is full"), std::string::npos) << full->error;
  EXPECT_EQ(s.stats().num_rejections, 6);
  EXPECT_EQ(s.num_waiting(), 7);
}

TEST(Scheduler, AddRejectsBeyondModelContextAndUnchunkedBudget) {
  SchedulerConfig c = config(1000, 4, 16, 4);
  c.max_model_len = 20;
  Scheduler s(c);
  auto r = s.add(make_seq(1, 10, 11), TimePoint{});
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->reject_reason, RejectReason::kContextExceeded);
  EXPECT_NE(r->error.find("model context of 20"), std::string::npos) << r->error;
  EXPECT_EQ(s.add(make_seq(2, 10, 10), TimePoint{}), nullptr);
  r = s.add(make_seq(3, 17, 1), TimePoint{});
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->reject_reason, RejectReason::kPromptTooLong);
  EXPECT_NE(r->error.find("max_batch_tokens"), std::string::npos) << r->error;
  r = s.add(make_seq(4, 20, 1), TimePoint{});  // the prompt alone fills the context
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->reject_reason, RejectReason::kPromptTooLong);
  EXPECT_NE(r->error.find("leaves no room"), std::string::npos) << r->error;
}

TEST(Scheduler, InvalidConfigThrows) {
  SchedulerConfig c = config(16, 4, 8, 16);  // budget below max_seqs
  EXPECT_THROW(Scheduler{c}, Error);
  c = config(0, 4, 64, 4);
  EXPECT_THROW(Scheduler{c}, Error);
}

TEST(Scheduler, DeadlinesExpireWaitingAndRunningSequences) {
  Driver d(config(64, 4, 64, 1));
  auto a = make_seq(1, 4, 100);
  a->deadline = d.now + milliseconds(3);
  auto b = make_seq(2, 4, 100);
  b->deadline = d.now + milliseconds(2);
  d.add(std::move(a));
  d.add(std::move(b));
  EXPECT_EQ(d.step(), (std::vector<Entry>{{1, 0, 4, true, false}}));
  EXPECT_EQ(d.step(), (std::vector<Entry>{{1, 4, 1, true, true}}));
  EXPECT_EQ(d.step(), (std::vector<Entry>{{1, 5, 1, true, true}}));  // 2 expires (queued)
  ASSERT_NE(d.finished_seq(2), nullptr);                             // never ran: rejected, not timed out
  EXPECT_EQ(d.finished_seq(2)->finish_reason, FinishReason::kRejected);
  EXPECT_EQ(d.finished_seq(2)->reject_reason, RejectReason::kDeadlineExpired);
  EXPECT_EQ(d.step(), (std::vector<Entry>{}));  // 1 expires (running)
  const Sequence* s1 = d.finished_seq(1);
  ASSERT_NE(s1, nullptr);
  EXPECT_EQ(s1->finish_reason, FinishReason::kTimeout);
  EXPECT_EQ(s1->output, reference_generate(s1->prompt, 3));
  EXPECT_EQ(d.sched.allocator().num_used(), 0);
  EXPECT_EQ(d.sched.stats().num_timeouts, 1);
  EXPECT_EQ(d.sched.stats().num_rejections, 1);
}

TEST(Scheduler, CancelFreesBlocksAtTheNextSchedule) {
  Driver d(config(3, 4, 64, 4));
  d.add(make_seq(1, 8, 4));  // 11 slots: all 3 blocks eventually
  d.step();
  d.add(make_seq(2, 8, 1));  // needs 2 blocks; 1 is free
  EXPECT_EQ(d.step(), (std::vector<Entry>{{1, 8, 1, true, true}}));
  EXPECT_TRUE(d.sched.cancel(1));
  EXPECT_FALSE(d.sched.cancel(99));
  EXPECT_EQ(d.sched.allocator().num_used(), 3);  // nothing happens until schedule()
  EXPECT_EQ(d.step(), (std::vector<Entry>{{2, 0, 8, true, false}}));
  const Sequence* s1 = d.finished_seq(1);
  ASSERT_NE(s1, nullptr);
  EXPECT_EQ(s1->finish_reason, FinishReason::kCancelled);
  EXPECT_TRUE(s1->table(0).empty());
  EXPECT_EQ(d.sched.stats().num_cancellations, 1);
  EXPECT_FALSE(d.sched.has_work());
  EXPECT_EQ(d.sched.allocator().num_used(), 0);
}

TEST(Scheduler, StopCheckEndsWithStopBeforeLength) {
  Driver d(config(64, 4, 64, 4));
  auto seq = make_seq(1, 5, 10);
  const std::vector<int32_t> expected = reference_generate(seq->prompt, 3);
  d.stop = [&](const SampledToken& t) { return t.token == expected[2] ? FinishReason::kStop : FinishReason::kNone; };
  d.add(std::move(seq));
  d.run_to_completion();
  const Sequence* s = d.finished_seq(1);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->finish_reason, FinishReason::kStop);
  EXPECT_EQ(s->output, expected);
  ASSERT_TRUE(s->first_token && s->first_scheduled && s->finished);
  EXPECT_LE(*s->first_scheduled, *s->first_token);
  EXPECT_LE(*s->first_token, *s->finished);
}

TEST(Scheduler, FailBatchAndFinishAllReleaseEverything) {
  Scheduler s(config(16, 4, 64, 4));
  ASSERT_EQ(s.add(make_seq(1, 6, 4), TimePoint{}), nullptr);
  ASSERT_EQ(s.add(make_seq(2, 6, 4), TimePoint{}), nullptr);
  ScheduledBatch batch = s.schedule(TimePoint{});
  ASSERT_EQ(batch.seqs.size(), 2u);
  auto failed = s.fail_batch(batch, "forward pass failed", TimePoint{});
  ASSERT_EQ(failed.size(), 2u);
  EXPECT_EQ(failed[0]->finish_reason, FinishReason::kError);
  EXPECT_EQ(failed[0]->error, "forward pass failed");
  EXPECT_EQ(s.allocator().num_used(), 0);
  ASSERT_EQ(s.add(make_seq(3, 6, 4), TimePoint{}), nullptr);
  batch = s.schedule(TimePoint{});
  EXPECT_TRUE(s.commit(batch, sampled_tokens(batch, {7}), TimePoint{}).empty());
  ASSERT_EQ(s.add(make_seq(4, 6, 4), TimePoint{}), nullptr);
  auto all = s.finish_all(FinishReason::kCancelled, TimePoint{});
  EXPECT_EQ(all.size(), 2u);
  EXPECT_FALSE(s.has_work());
  EXPECT_EQ(s.allocator().num_used(), 0);
}

TEST(Scheduler, NamesOfReasons) {
  EXPECT_EQ(finish_reason_name(FinishReason::kTimeout), "timeout");
  EXPECT_EQ(reject_reason_name(RejectReason::kQueueFull), "queue_full");
  EXPECT_EQ(reject_reason_name(RejectReason::kKvNeverFits), "kv_never_fits");
  EXPECT_EQ(reject_reason_name(RejectReason::kDeadlineExpired), "deadline_expired");
}

}  // namespace
}  // namespace tokenmill::sched
