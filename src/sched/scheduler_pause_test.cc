// Scheduler: paused sequences (set_paused) sit out every step, keep their
// blocks and slots, never stall or block others, give way under KV
// pressure, and resume with the output an unpaused run gives.
#include <gtest/gtest.h>

#include <algorithm>

#include "sched/scheduler.h"
#include "sched/test_harness.h"

namespace tokenmill::sched {
namespace {

using sched_test::config;
using sched_test::Driver;
using sched_test::Entry;
using sched_test::expect_reference_output;
using sched_test::make_seq;
using sched_test::reference_generate;
using std::chrono::milliseconds;

bool ran(const std::vector<Entry>& entries, uint64_t id) {
  return std::any_of(entries.begin(), entries.end(), [&](const Entry& e) { return e.id == id; });
}

TEST(SchedulerPause, APausedSequenceSitsOutKeepsItsSlotAndResumes) {
  Driver d(config(64, 4, 64, 2));
  d.add(make_seq(1, 3, 10));
  d.add(make_seq(2, 5, 10));
  d.step();  // both prefill
  ASSERT_TRUE(d.sched.set_paused(1, true));
  d.add(make_seq(3, 2, 4));
  for (int64_t i = 0; i < 4; ++i) EXPECT_EQ(d.step(), (std::vector<Entry>{{2, 5 + i, 1, true, true}}));
  EXPECT_EQ(d.sched.num_waiting(), 1);  // request 3: the paused one keeps its slot
  EXPECT_EQ(d.sched.find(1)->num_output_tokens(), 1);
  EXPECT_EQ(d.sched.stats().num_paused, 1);
  ASSERT_TRUE(d.sched.set_paused(1, false));
  EXPECT_EQ(d.step(), (std::vector<Entry>{{1, 3, 1, true, true}, {2, 9, 1, true, true}}));
  d.run_to_completion();
  expect_reference_output(d, 1, 10);
  expect_reference_output(d, 2, 10);
  expect_reference_output(d, 3, 4);
  EXPECT_EQ(d.num_preempted, 0);
  EXPECT_FALSE(d.sched.set_paused(1, true));  // finished: unknown
  EXPECT_EQ(d.sched.stats().num_paused, 0);
}

TEST(SchedulerPause, PausedWaitingSequencesArePassedOverNotWaitedFor) {
  Driver d(config(64, 4, 64, 2));
  d.add(make_seq(1, 3, 4));
  d.add(make_seq(2, 3, 4));
  d.add(make_seq(3, 3, 4));
  ASSERT_TRUE(d.sched.set_paused(1, true));  // the head of the queue
  EXPECT_EQ(d.step(), (std::vector<Entry>{{2, 0, 3, true, false}, {3, 0, 3, true, false}}));
  ASSERT_TRUE(d.sched.set_paused(1, false));
  EXPECT_EQ(d.step(), (std::vector<Entry>{{2, 3, 1, true, true}, {3, 3, 1, true, true}}));  // no slot yet
  d.run_to_completion();
  for (uint64_t id : {1, 2, 3}) expect_reference_output(d, id, 4);
}

TEST(SchedulerPause, AllPausedIsNoStallAndCancelsAndDeadlinesStillApply) {
  Driver d(config(64, 4, 64, 4));
  d.add(make_seq(1, 3, 50));
  auto timed = make_seq(2, 3, 50);
  timed->deadline = d.now + milliseconds(5);
  d.add(std::move(timed));
  d.step();
  ASSERT_TRUE(d.sched.set_paused(1, true));
  ASSERT_TRUE(d.sched.set_paused(2, true));
  for (int i = 0; i < 6; ++i) EXPECT_TRUE(d.step().empty());
  EXPECT_EQ(d.num_preempted, 0);
  ASSERT_NE(d.finished_seq(2), nullptr);
  EXPECT_EQ(d.finished_seq(2)->finish_reason, FinishReason::kTimeout);
  EXPECT_TRUE(d.sched.has_work());
  EXPECT_TRUE(d.sched.cancel(1));
  d.step();
  ASSERT_NE(d.finished_seq(1), nullptr);
  EXPECT_EQ(d.finished_seq(1)->finish_reason, FinishReason::kCancelled);
  EXPECT_FALSE(d.sched.has_work());
  EXPECT_EQ(d.sched.allocator().num_used(), 0);
}

// 7 blocks of 4: request 2 needs 6 for its 8 + 16 - 1 positions while the
// paused request 1 holds 2. Short of its sixth, request 2 preempts the
// paused one, though that ranks higher, rather than itself.
TEST(SchedulerPause, UnderKvPressureThePausedSequenceIsTheVictim) {
  Driver d(config(7, 4, 64, 4));
  d.add(make_seq(1, 8, 16));
  d.add(make_seq(2, 8, 16));
  d.step();
  ASSERT_TRUE(d.sched.set_paused(1, true));
  for (int i = 0; i < 100 && d.finished_seq(2) == nullptr; ++i) EXPECT_FALSE(ran(d.step(), 1));
  expect_reference_output(d, 2, 16);
  EXPECT_EQ(d.num_preempted, 1);
  const Sequence* paused = d.sched.find(1);
  ASSERT_NE(paused, nullptr);
  EXPECT_EQ(paused->status, SequenceStatus::kPreempted);
  EXPECT_TRUE(paused->paused);
  EXPECT_TRUE(d.step().empty());  // waiting and paused: not readmitted
  ASSERT_TRUE(d.sched.set_paused(1, false));
  d.run_to_completion();
  expect_reference_output(d, 1, 16);
}

// The head of the queue short of blocks takes them from a paused sequence
// under kPreempt; under kQueue it waits until the paused one resumes and ends.
TEST(SchedulerPause, TheHeadOfTheQueueTakesAPausedSequencesBlocksUnderPreempt) {
  for (KvExhaustedPolicy policy : {KvExhaustedPolicy::kPreempt, KvExhaustedPolicy::kQueue}) {
    SchedulerConfig c = config(6, 4, 64, 4);
    c.on_kv_exhausted = policy;
    Driver d(c);
    d.add(make_seq(1, 16, 4));
    d.step();  // 4 blocks
    ASSERT_TRUE(d.sched.set_paused(1, true));
    d.add(make_seq(2, 12, 2));  // 3 blocks; 2 are free, one reserved for request 1's next token
    if (policy == KvExhaustedPolicy::kPreempt) {
      EXPECT_EQ(d.step(), (std::vector<Entry>{{2, 0, 12, true, false}}));
      EXPECT_EQ(d.num_preempted, 1);
    } else {
      EXPECT_TRUE(d.step().empty());
      EXPECT_EQ(d.sched.num_waiting(), 1);
    }
    ASSERT_TRUE(d.sched.set_paused(1, false));
    d.run_to_completion();
    expect_reference_output(d, 1, 4);
    expect_reference_output(d, 2, 2);
  }
}

TEST(SchedulerPause, AForkPausedBeforeItExistsStartsPaused) {
  Driver d(config(64, 4, 64, 4));
  auto parent = make_seq(1, 5, 6);
  parent->fork_ids = {11, 12};
  d.add(std::move(parent));
  ASSERT_TRUE(d.sched.set_paused(12, true));
  EXPECT_FALSE(d.sched.set_paused(13, true));
  EXPECT_EQ(d.sched.stats().num_paused, 1);
  d.step();  // prefill; the forks are made
  ASSERT_NE(d.sched.find(12), nullptr);
  EXPECT_TRUE(d.sched.find(12)->paused);
  EXPECT_FALSE(d.sched.find(11)->paused);
  EXPECT_EQ(d.sched.stats().num_paused, 1);
  for (int i = 0; i < 3; ++i) {
    const std::vector<Entry> entries = d.step();
    EXPECT_TRUE(ran(entries, 1) && ran(entries, 11) && !ran(entries, 12));
  }
  ASSERT_TRUE(d.sched.set_paused(12, false));
  d.run_to_completion();
  for (uint64_t id : {1, 11, 12}) {
    ASSERT_NE(d.finished_seq(id), nullptr);
    d.expect_reference(*d.finished_seq(id));
  }

  auto other = make_seq(2, 5, 6);
  other->fork_ids = {21};
  d.add(std::move(other));
  ASSERT_TRUE(d.sched.set_paused(21, true));
  ASSERT_TRUE(d.sched.drop_fork(2, 21));
  EXPECT_EQ(d.sched.stats().num_paused, 0);
}

}  // namespace
}  // namespace tokenmill::sched
