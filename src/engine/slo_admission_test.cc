// SLO-aware admission on a fake clock and a known step cost: it admits
// exactly the requests whose forecast meets the targets, protects the
// requests already admitted, lets a higher class push a lower one out, and
// reports its forecast error.
#include "engine/slo_admission.h"

#include <gtest/gtest.h>

#include <cmath>
#include <deque>

#include "util/error.h"

namespace tokenmill::engine {
namespace {

using std::chrono::milliseconds;

// Steps of 10 ms + 2 ms per decode + 0.5 ms per prefill token.
void teach_cost(SloAdmission& slo) {
  for (int i = 0; i < 200; ++i) {
    StepStats decode;
    decode.decode_tokens = 1 + i % 8;
    decode.step_ms = 10.0 + 2.0 * static_cast<double>(decode.decode_tokens);
    slo.observe_step(decode);
    StepStats prefill;
    prefill.prefill_tokens = 100 * (1 + i % 4);
    prefill.step_ms = 10.0 + 0.5 * static_cast<double>(prefill.prefill_tokens);
    slo.observe_step(prefill);
  }
}

// An admission with these targets and limits that has been taught the cost above.
SloAdmission taught(const SloTargets& targets, const sched::ForecastLimits& limits, Metrics& metrics) {
  SloAdmission slo(targets, limits, metrics);
  teach_cost(slo);
  return slo;
}

struct Fixture {
  Metrics metrics;
  SteadyClock::time_point now = SteadyClock::time_point{} + std::chrono::hours(1);
  std::deque<sched::Sequence> seqs;  // stable addresses
  std::vector<sched::RankedSequence> ranked;
  uint64_t next_id = 1;

  sched::Sequence make(int64_t prompt, int64_t max_tokens, int priority = 1) {
    sched::Sequence s;
    s.id = next_id++;
    s.prompt.assign(static_cast<size_t>(prompt), 7);
    s.max_tokens = max_tokens;
    s.priority = priority;
    s.arrival = now;
    return s;
  }
  // Queued behind the others (as Scheduler::ranked lists it: running first).
  void queue(sched::Sequence s) {
    seqs.push_back(std::move(s));
    ranked.push_back({&seqs.back(), false, seqs.back().priority});
  }
  // Offers identical requests until one is refused, queueing the admitted
  // ones: how many were admitted, and the refusal (at most `limit` tried).
  std::pair<int, std::optional<SloRefusal>> fill(SloAdmission& slo, int64_t prompt, int64_t max_tokens,
                                                 int priority = 1, int limit = 100) {
    for (int admitted = 0; admitted < limit; ++admitted) {
      sched::Sequence s = make(prompt, max_tokens, priority);
      if (std::optional<SloRefusal> r = slo.check(s, ranked, now)) return {admitted, r};
      queue(std::move(s));
    }
    return {limit, std::nullopt};
  }
  // Running and decoding: prompt computed, `generated` tokens out.
  void run(int64_t prompt, int64_t max_tokens, int64_t generated, int priority = 1) {
    sched::Sequence s = make(prompt, max_tokens, priority);
    s.arrival = now - milliseconds(100);
    s.output.assign(static_cast<size_t>(generated), 9);
    s.num_computed_tokens = s.num_tokens() - 1;
    s.first_scheduled = s.arrival;
    s.first_token = s.arrival + milliseconds(50);
    seqs.push_back(std::move(s));
    ranked.insert(ranked.begin(), {&seqs.back(), true, priority});
  }
};

TEST(SloAdmission, AdmitsEverythingUntilTheCostIsMeasured) {
  Fixture fx;
  SloAdmission slo({1.0, 0, 0}, {512, 4, 0}, fx.metrics);  // a 1 ms TTFT target nobody meets
  EXPECT_FALSE(slo.check(fx.make(100, 1), fx.ranked, fx.now));
}

TEST(SloAdmission, AdmitsExactlyTheRequestsThatMeetTheTtftTarget) {
  Fixture fx;
  // 4 slots, whole prompts per step: requests of 100 tokens and one output
  // token prefill four per step. With a 600 ms target, request i (0-based)
  // gets its token at the end of step i / 4 + 1; steps cost what the model
  // fitted. Count by hand how many fit, then see admission take exactly those.
  SloAdmission slo = taught({600.0, 0, 0}, {512, 4, 0}, fx.metrics);
  const sched::StepCostModel& c = slo.cost();
  int expected = 0;
  for (int i = 0;; ++i) {
    const int full_steps = i / 4;
    const double ttft = full_steps * c.step_ms(0, 400) + c.step_ms(0, 100 * (i % 4 + 1));
    if (ttft > 600.0) break;
    ++expected;
  }
  ASSERT_GT(expected, 4);  // the case must span more than one step to mean anything
  const auto [admitted, r] = fx.fill(slo, 100, 1);
  EXPECT_EQ(admitted, expected);
  ASSERT_TRUE(r);
  EXPECT_NE(r->message.find("time to first token"), std::string::npos) << r->message;
  EXPECT_GE(r->retry_after_s, 1.0);
  // Time passes without progress (the engine was stalled): the last ones
  // queued can no longer make it and are named.
  const auto late = slo.unattainable(fx.ranked, fx.now + milliseconds(100));
  ASSERT_FALSE(late.empty());
  EXPECT_EQ(late.back().first, fx.seqs.back().id);
  EXPECT_TRUE(slo.unattainable(fx.ranked, fx.now).empty());
}

TEST(SloAdmission, AdmitsDecodersWhileTheStepStaysWithinTheTpotTarget) {
  Fixture fx;
  // A decode step of D rows costs about 10 + 2 D ms: a 20.5 ms TPOT target
  // holds up to 5 rows. Two are running; three more fit.
  SloAdmission slo = taught({0, 20.5, 0}, {512, 16, 0}, fx.metrics);
  int rows = 0;
  while (slo.cost().step_ms(rows + 1, 0) <= 20.5) ++rows;
  ASSERT_EQ(rows, 5);
  fx.run(8, 1000, 10);
  fx.run(8, 1000, 10);
  const auto [admitted, r] = fx.fill(slo, 1, 1000, 1, 10);
  EXPECT_EQ(admitted, rows - 2);
  ASSERT_TRUE(r);
  EXPECT_NE(r->message.find("time per output token"), std::string::npos) << r->message;
}

TEST(SloAdmission, RefusesARequestThatWouldPushAnAdmittedOnePastItsTarget) {
  Fixture fx;
  // A running request with 4 tokens left at ~12 ms each. A 2000-token
  // prompt (one output token: no TPOT of its own) meets a generous TTFT
  // target, but its prefill steps would stretch the running request's TPOT
  // past 40 ms.
  SloAdmission slo = taught({5000.0, 40.0, 0}, {512, 8, 512}, fx.metrics);
  fx.run(8, 6, 2);
  const std::optional<SloRefusal> r = slo.check(fx.make(2000, 1), fx.ranked, fx.now);
  ASSERT_TRUE(r);
  EXPECT_NE(r->message.find("already admitted"), std::string::npos) << r->message;
  // Of a lower class than the newcomer, the running request may be pushed.
  Fixture low;
  SloAdmission slo2 = taught({5000.0, 40.0, 0}, {512, 8, 512}, low.metrics);
  low.run(8, 6, 2, /*priority=*/2);
  EXPECT_FALSE(slo2.check(low.make(2000, 1, /*priority=*/1), low.ranked, low.now));
}

TEST(SloAdmission, AHigherClassOvertakesAndPushesALowerOneOut) {
  Fixture fx;
  SloAdmission slo = taught({250.0, 0, 0}, {512, 4, 0}, fx.metrics);
  // Fill the queue with low-priority requests until the next is refused.
  ASSERT_TRUE(fx.fill(slo, 100, 1, /*priority=*/2).second);
  // A high-priority request ranks ahead of them all: it is admitted...
  sched::Sequence high = fx.make(100, 1, 0);
  ASSERT_FALSE(slo.check(high, fx.ranked, fx.now));
  const uint64_t high_id = high.id;
  fx.seqs.push_back(std::move(high));
  fx.ranked.insert(fx.ranked.begin(), {&fx.seqs.back(), false, 0});
  // ...and the low-priority request now last in line cannot make it any more.
  const auto late = slo.unattainable(fx.ranked, fx.now);
  ASSERT_EQ(late.size(), 1u);
  EXPECT_NE(late[0].first, high_id);
  EXPECT_EQ(late[0].first, fx.ranked.back().seq->id);
}

TEST(SloAdmission, CountsThePromptTheCacheHoldsAsDone) {
  Fixture fx;
  // A 400-token prompt alone takes one ~210 ms prefill step: over a 100 ms
  // target, unless the prefix cache holds 384 of its tokens.
  SloAdmission slo = taught({100.0, 0, 0}, {512, 4, 0}, fx.metrics);
  EXPECT_TRUE(slo.check(fx.make(400, 1), fx.ranked, fx.now));
  sched::Sequence hit = fx.make(400, 1);
  EXPECT_FALSE(slo.check(hit, fx.ranked, fx.now, 384));
  fx.queue(std::move(hit));
  // While it waits its estimate stands: a second such request fits behind it.
  EXPECT_FALSE(slo.check(fx.make(400, 1), fx.ranked, fx.now, 384));
}

TEST(SloAdmission, ReportsTheForecastErrorAndTheRetryEstimate) {
  Fixture fx;
  SloAdmission slo = taught({250.0, 0, 0}, {512, 4, 0}, fx.metrics);
  sched::Sequence s = fx.make(100, 4);
  ASSERT_FALSE(slo.check(s, fx.ranked, fx.now));
  FinalEvent done;
  done.reason = FinishReason::kLength;
  done.usage.completion_tokens = 4;
  done.timings.ttft_ms = 120.0;
  done.timings.tpot_ms = 15.0;
  slo.on_final(s.id, s.max_tokens, done);
  const MetricsSnapshot m = fx.metrics.snapshot();
  const SloPredictionStats& ttft = m.slo_prediction[static_cast<size_t>(SloMetric::kTtft)];
  EXPECT_EQ(ttft.count, 1u);
  const double forecast = slo.cost().step_ms(0, 100);  // alone: one prefill step
  EXPECT_NEAR(ttft.error_seconds_sum, (120.0 - forecast) / 1e3, 1e-9);
  EXPECT_EQ(m.slo_prediction[static_cast<size_t>(SloMetric::kTpot)].count, 1u);
  EXPECT_GT(m.slo_step_fixed_ms, 0.0);

  // A refused request's final event carries the retry estimate.
  Fixture busy;
  SloAdmission slo2 = taught({50.0, 0, 0}, {512, 4, 0}, busy.metrics);
  sched::Sequence big = busy.make(400, 1);
  ASSERT_TRUE(slo2.check(big, busy.ranked, busy.now));
  FinalEvent refused;
  refused.reason = FinishReason::kRejected;
  refused.reject = RejectReason::kSloUnattainable;
  slo2.on_final(big.id, big.max_tokens, refused);
  EXPECT_GE(refused.retry_after_s, 1.0);
}

TEST(SloAdmission, LearnsHowMuchOfMaxTokensRequestsUse) {
  Fixture fx;
  SloAdmission slo = taught({0, 0, 1000.0}, {512, 4, 0}, fx.metrics);
  // 200 tokens at ~12 ms each miss a 1 s end-to-end target...
  EXPECT_TRUE(slo.check(fx.make(10, 200), fx.ranked, fx.now));
  // ...until requests are seen to stop after a tenth of max_tokens.
  for (int i = 0; i < 60; ++i) {
    FinalEvent f;
    f.reason = FinishReason::kStop;
    f.usage.completion_tokens = 20;
    slo.on_final(1000 + i, 200, f);
  }
  EXPECT_NEAR(slo.output_share(), 0.1, 0.01);
  EXPECT_FALSE(slo.check(fx.make(10, 200), fx.ranked, fx.now));
}

TEST(SloTargets, RejectsNegativeAndNonFiniteTargets) {
  EXPECT_NO_THROW((SloTargets{500, 33, 5000}.validate()));
  EXPECT_FALSE(SloTargets{}.enabled());
  EXPECT_THROW((SloTargets{-1, 0, 0}.validate()), Error);
  EXPECT_THROW((SloTargets{0, std::nan(""), 0}.validate()), Error);
}

}  // namespace
}  // namespace tokenmill::engine
