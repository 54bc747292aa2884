// The forecast replays the scheduler's policy: checked on queues whose
// timeline can be written down by hand, with the cost model as the clock.
#include "sched/slo_forecast.h"

#include <gtest/gtest.h>

namespace tokenmill::sched {
namespace {

// A cost model that has seen steps costing 10 ms + 2 ms per decode + 0.5 ms per prefill token.
StepCostModel fitted_cost() {
  StepCostModel m;
  for (int i = 0; i < 200; ++i) {
    const int64_t d = 1 + i % 8;
    m.observe(d, 0, 10.0 + 2.0 * d);
    m.observe(i % 2, 100 * (1 + i % 4), 10.0 + 2.0 * (i % 2) + 50.0 * (1 + i % 4));
  }
  return m;
}

ForecastSeq waiting(int64_t prompt, int64_t output) { return {false, 1, prompt, output}; }
ForecastSeq decoding(int64_t output_left) { return {true, 1, 0, output_left}; }

TEST(SloForecast, PrefillsInRankOrderWithinTheSlotsAndBudget) {
  const StepCostModel cost = fitted_cost();
  // Five one-token requests of 100 prompt tokens, 4 slots, unchunked: four
  // prefill in the first step, the fifth in the second.
  std::vector<ForecastSeq> seqs(5, waiting(100, 1));
  const std::vector<SeqForecast> f = forecast(seqs, {512, 4, 0}, cost, 1e6);
  const double step1 = cost.step_ms(0, 400), step2 = cost.step_ms(0, 100);
  for (int i = 0; i < 4; ++i) {
    EXPECT_DOUBLE_EQ(f[i].first_token_ms, step1) << i;
    EXPECT_DOUBLE_EQ(f[i].last_token_ms, step1) << i;  // one token: done at once
  }
  EXPECT_DOUBLE_EQ(f[4].first_token_ms, step1 + step2);
}

TEST(SloForecast, ChunkedPrefillSharesTheStepWithDecodes) {
  const StepCostModel cost = fitted_cost();
  // Two decoding sequences (3 tokens left) and a 300-token prompt in chunks
  // of 128 with a 256-token step budget: chunks 128, 128, 44.
  std::vector<ForecastSeq> seqs = {decoding(3), decoding(3), waiting(300, 2)};
  const std::vector<SeqForecast> f = forecast(seqs, {256, 8, 128}, cost, 1e6);
  const double s1 = cost.step_ms(2, 128), s2 = cost.step_ms(2, 128), s3 = cost.step_ms(2, 44);
  EXPECT_EQ(f[0].first_token_ms, 0.0);  // already past
  EXPECT_DOUBLE_EQ(f[0].last_token_ms, s1 + s2 + s3);
  EXPECT_DOUBLE_EQ(f[2].first_token_ms, s1 + s2 + s3);
  // Its second (last) token: a decode step alone (the others are done).
  EXPECT_DOUBLE_EQ(f[2].last_token_ms, s1 + s2 + s3 + cost.step_ms(1, 0));
}

TEST(SloForecast, WaitsForASlotWhenTheBatchIsFull) {
  const StepCostModel cost = fitted_cost();
  // Two slots, both held by decodes with 5 and 9 tokens left: the waiting
  // request starts once the first finishes, in a step beside the other.
  std::vector<ForecastSeq> seqs = {decoding(5), decoding(9), waiting(50, 4)};
  const std::vector<SeqForecast> f = forecast(seqs, {512, 2, 0}, cost, 1e6);
  const double five = 5 * cost.step_ms(2, 0);
  EXPECT_NEAR(f[0].last_token_ms, five, 1e-9);
  const double first = five + cost.step_ms(1, 50);
  EXPECT_NEAR(f[2].first_token_ms, first, 1e-9);
  // Then both decode: the long one has 9 - 5 - 1 = 3 left, the new one 3.
  EXPECT_NEAR(f[1].last_token_ms, first + 3 * cost.step_ms(2, 0), 1e-9);
  EXPECT_NEAR(f[2].last_token_ms, first + 3 * cost.step_ms(2, 0), 1e-9);
}

TEST(SloForecast, ParallelSamplesTakeTheirSlots) {
  const StepCostModel cost = fitted_cost();
  // A 3-sample request in 4 slots: the one-sample request behind it fits
  // beside it; a second 3-sample request would not.
  std::vector<ForecastSeq> seqs = {{false, 3, 10, 2}, {false, 3, 10, 2}, {false, 1, 10, 2}};
  const std::vector<SeqForecast> f = forecast(seqs, {512, 4, 0}, cost, 1e6);
  EXPECT_DOUBLE_EQ(f[0].first_token_ms, cost.step_ms(0, 10));
  // No overtaking: the head (3 slots) does not fit, so the last waits too.
  EXPECT_GT(f[1].first_token_ms, f[0].first_token_ms);
  EXPECT_DOUBLE_EQ(f[2].first_token_ms, f[1].first_token_ms);
}

TEST(SloForecast, StopsAtTheHorizon) {
  const StepCostModel cost = fitted_cost();
  std::vector<ForecastSeq> seqs = {decoding(1000000), waiting(10, 1)};
  const std::vector<SeqForecast> f = forecast(seqs, {512, 1, 0}, cost, 1000.0);
  EXPECT_EQ(f[0].last_token_ms, SeqForecast::kNever);
  EXPECT_EQ(f[1].first_token_ms, SeqForecast::kNever);
}

}  // namespace
}  // namespace tokenmill::sched
