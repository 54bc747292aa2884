// Speculative decoding in the scheduler, on the fake model that predicts from
// what it reads back through the block tables: a decode computes its draft
// tokens too, commit keeps the accepted ones (their K/V counts as computed)
// and gives back the slots of the rejected ones, drafts never take more
// than the step's budget or run past max_tokens, and under preemption,
// prefix hits and a sliding-window group every output is still the
// reference's and the pools end free.
#include <gtest/gtest.h>

#include <random>

#include "sched/scheduler.h"
#include "sched/test_harness.h"

namespace tokenmill::sched {
namespace {

using sched_test::Driver;
using sched_test::make_seq;
using sched_test::reference_generate;

SchedulerConfig spec_config(int32_t num_blocks, int32_t window_blocks = 0, int64_t window = 0) {
  SchedulerConfig c;
  c.kv_groups = {{num_blocks, 0}};
  if (window > 0) c.kv_groups.push_back({window_blocks, window});
  c.block_size = 4;
  c.max_batch_tokens = 32;
  c.max_seqs = 4;
  c.prefill_chunk = 8;
  return c;
}

// The next k tokens of the reference continuation: every draft is right.
std::vector<int32_t> oracle(const Sequence& s, size_t k) {
  const std::vector<int32_t> all = reference_generate(s.prompt, s.num_output_tokens() + static_cast<int64_t>(k));
  return {all.end() - static_cast<std::ptrdiff_t>(k), all.end()};
}

void expect_reference_and_free(const Driver& d, size_t num_requests) {
  ASSERT_EQ(d.finished.size(), num_requests);
  for (const auto& s : d.finished) {
    EXPECT_EQ(s->finish_reason, FinishReason::kLength) << "request " << s->id;
    EXPECT_EQ(s->output, reference_generate(s->prompt, s->num_output_tokens())) << "request " << s->id;
  }
  for (size_t g = 0; g < d.sched.num_groups(); ++g) EXPECT_EQ(d.sched.allocator(g).num_used(), 0) << "group " << g;
}

TEST(SchedulerSpec, RightDraftsAreAcceptedAndSaveSteps) {
  Driver d(spec_config(64));
  d.propose = [](const Sequence& s) { return oracle(s, 3); };
  d.add(make_seq(1, 6, 21));
  const int steps = d.run_to_completion();
  expect_reference_and_free(d, 1);
  EXPECT_GT(d.num_draft_tokens, 0);
  EXPECT_EQ(d.num_accepted_tokens, d.num_draft_tokens);
  // One prefill step, then 4 tokens per step: 20 tokens after the first in 5 steps.
  EXPECT_EQ(steps, 6);
}

TEST(SchedulerSpec, WrongDraftsGiveTheirSlotsBack) {
  Driver d(spec_config(64));
  d.propose = [](const Sequence&) { return std::vector<int32_t>{0, 0, 0, 0, 0, 0, 0}; };  // never predicted
  d.add(make_seq(1, 5, 30));
  while (d.sched.has_work()) {
    d.step();
    const Sequence* s = d.sched.find(1);
    if (s == nullptr) break;
    // Only the verified tokens keep slots: the table ends where the K/V does.
    EXPECT_EQ(s->table(0).num_tokens(), s->num_computed_tokens);
    EXPECT_LE(s->table(0).blocks().size(), static_cast<size_t>((s->num_computed_tokens + 3) / 4));
  }
  expect_reference_and_free(d, 1);
  EXPECT_EQ(d.num_accepted_tokens, 0);
  EXPECT_GT(d.num_draft_tokens, 0);
}

// Drafts are trimmed to the step's budget left after one token for every
// decode (Driver checks batch.num_tokens() <= max_batch_tokens) and to
// max_tokens (a longer accepted draft would fail commit's check).
TEST(SchedulerSpec, DraftsFitTheBudgetAndMaxTokens) {
  SchedulerConfig c = spec_config(64);
  c.max_batch_tokens = 6;
  c.prefill_chunk = 6;
  Driver d(c);
  d.propose = [](const Sequence& s) { return oracle(s, 8); };
  // Three prompts of 2 prefill in one step; then three decodes share a
  // budget of 6: three draft tokens among them.
  for (uint64_t id = 1; id <= 3; ++id) d.add(make_seq(id, 2, id == 3 ? 3 : 20));
  d.step();
  const std::vector<sched_test::Entry> ran = d.step();
  ASSERT_EQ(ran.size(), 3u);
  int64_t tokens = 0;
  for (const sched_test::Entry& e : ran) tokens += e.n;
  EXPECT_EQ(tokens, 6);
  EXPECT_EQ(ran[0].n, 4);  // the first in rank takes what the others leave
  d.run_to_completion();
  expect_reference_and_free(d, 3);
  EXPECT_EQ(d.finished_seq(3)->num_output_tokens(), 3);
  EXPECT_GT(d.num_accepted_tokens, 0);
}

// Random drafts (right for a random number of tokens, then wrong), shared
// prompt prefixes (prefix-cache hits on blocks published from verified
// tokens), a pool small enough to preempt, with and without a window group.
TEST(SchedulerSpec, RandomDraftsUnderPressureKeepTheReference) {
  for (int64_t window : {0, 6}) {
    SchedulerConfig c = spec_config(14, 40, window);
    Driver d(c);
    std::mt19937_64 rng(5);
    d.propose = [&](const Sequence& s) {
      std::vector<int32_t> draft = oracle(s, rng() % 7);
      if (!draft.empty() && rng() % 2) draft[rng() % draft.size()] = 0;
      return draft;
    };
    for (uint64_t id = 1; id <= 24; ++id) {
      auto seq = make_seq(id, 3 + static_cast<int64_t>(rng() % 10), 1 + static_cast<int64_t>(rng() % 25), 1,
                          rng() % 2 ? 100 : -1);  // half share a prefix
      d.add(std::move(seq));
      if (id % 3 == 0) d.step();
    }
    d.run_to_completion();
    expect_reference_and_free(d, 24);
    EXPECT_GT(d.num_preempted, 0) << "window " << window;
    EXPECT_GT(d.num_accepted_tokens, 0) << "window " << window;
    EXPECT_LT(d.num_accepted_tokens, d.num_draft_tokens) << "window " << window;
    EXPECT_GT(d.sched.stats().prefix_cache.hit_tokens, 0) << "window " << window;
  }
}

}  // namespace
}  // namespace tokenmill::sched
