#include "spec/cost_model.h"

#include <gtest/gtest.h>

#include <cmath>

namespace tokenmill::spec {
namespace {

// Steps that follow cost = 20 + 5 T exactly (Gemma 3 270M on 2 cores is
// close to this: ~23 ms for one token, ~100 ms for 16).
SpecCostModel fitted(double c_per_draft_token = 0.0) {
  SpecCostModel m;
  for (int rep = 0; rep < 5; ++rep) {
    for (int64_t t : {1, 2, 4, 8, 16, 5}) m.observe_step(t, 20.0 + 5.0 * static_cast<double>(t));
  }
  if (c_per_draft_token > 0.0) m.observe_draft(10, 10 * c_per_draft_token);
  return m;
}

// The prior (a weak slope of 0.1 a) pulls the fit by about 1 % here.
TEST(SpecCostModel, FitsTheStepCostLine) {
  const SpecCostModel m = fitted();
  EXPECT_NEAR(m.fixed_ms(), 20.0, 0.4);
  EXPECT_NEAR(m.per_token_ms(), 5.0, 0.08);
  EXPECT_EQ(m.draft_ms_per_token(), 0.0);
}

TEST(SpecCostModel, OneStepSizeFallsBackToThePriorSlope) {
  SpecCostModel m;
  for (int i = 0; i < 10; ++i) m.observe_step(1, 22.0);
  EXPECT_NEAR(m.fixed_ms() + m.per_token_ms(), 22.0, 1e-9);
  EXPECT_NEAR(m.per_token_ms(), SpecCostModel::kPriorSlope * m.fixed_ms(), 1e-9);
}

TEST(SpecCostModel, KFollowsTheMarginalRule) {
  const SpecCostModel m = fitted();
  // One sequence: plain costs 25 ms a token, a draft token 5: alpha^j > 0.2.
  EXPECT_EQ(m.choose_k(0.8, 1, 16), 7);  // 0.8^7 = 0.21, 0.8^8 = 0.17
  EXPECT_EQ(m.choose_k(0.5, 1, 16), 2);  // 0.25 > 0.2 > 0.125
  EXPECT_EQ(m.choose_k(0.1, 1, 16), 0);
  EXPECT_EQ(m.choose_k(0.8, 1, 4), 4);  // capped at the configured k
  // 16 sequences: plain costs 6.25 ms a token: alpha^j > 0.8.
  EXPECT_EQ(m.choose_k(0.95, 16, 16), 4);  // 0.95^4 = 0.81
  EXPECT_EQ(m.choose_k(0.75, 16, 16), 0);
  // Drafting that costs 5 ms a token halves what pays at batch 1: alpha^j > 0.4.
  EXPECT_EQ(fitted(5.0).choose_k(0.8, 1, 16), 4);  // 0.8^4 = 0.41
}

TEST(SpecCostModel, SwitchOffBatchIsWhereNoDraftPays) {
  const SpecCostModel m = fitted();
  const double n = m.switch_off_batch(0.9);  // 0.9 * 20 / (5 * 0.1) = 36
  EXPECT_NEAR(n, 36.0, 1.5);
  EXPECT_GE(m.choose_k(0.9, static_cast<int64_t>(n) - 1, 16), 1);
  EXPECT_EQ(m.choose_k(0.9, static_cast<int64_t>(n) + 1, 16), 0);
  EXPECT_EQ(m.choose_k(0.9, 100, 16), 0);
}

TEST(SpecCostModel, BeforeAnyMeasurementEveryDraftIsTried) {
  const SpecCostModel m;
  EXPECT_FALSE(m.measured());
  EXPECT_EQ(m.choose_k(0.1, 32, 4), 4);
}

TEST(AcceptanceEstimate, MovesWithEvidenceAndRelaxesWhenIdle) {
  AcceptanceEstimate e;
  EXPECT_DOUBLE_EQ(e.alpha(), AcceptanceEstimate::kPrior);
  for (int i = 0; i < 30; ++i) e.observe(4, 4);
  EXPECT_GT(e.alpha(), 0.95);
  // A rejection at once is one failed trial (the tokens after it were never tried).
  for (int i = 0; i < 30; ++i) e.observe(4, 0);
  EXPECT_LT(e.alpha(), 0.25);
  const double low = e.alpha();
  for (int i = 0; i < 60; ++i) e.idle();
  EXPECT_GT(e.alpha(), low);
  EXPECT_NEAR(e.alpha(), AcceptanceEstimate::kPrior, 0.05);
  // Three of four kept, then a rejection: 3 successes in 4 trials.
  AcceptanceEstimate f;
  f.observe(4, 3);
  EXPECT_NEAR(f.alpha(), (3 + 0.6 * 2) / (4 + 2.0), 1e-12);
  // Another prior (the engine's estimate over all requests) in its place.
  EXPECT_NEAR(f.alpha(0.9), (3 + 0.9 * 2) / (4 + 2.0), 1e-12);
  EXPECT_DOUBLE_EQ(AcceptanceEstimate().alpha(0.95), 0.95);
  // A slowly forgetting estimate keeps old evidence longer.
  AcceptanceEstimate slow(0.99), fast;
  for (AcceptanceEstimate* e : {&slow, &fast}) {
    for (int i = 0; i < 20; ++i) e->observe(4, 4);
    for (int i = 0; i < 10; ++i) e->observe(4, 0);
  }
  EXPECT_GT(slow.alpha(), fast.alpha());
}

}  // namespace
}  // namespace tokenmill::spec
