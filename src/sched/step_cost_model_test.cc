// The step-cost model recovers a known linear cost from the steps it is
// shown, and only calls itself measured once both kinds of step were seen.
#include "sched/step_cost_model.h"

#include <gtest/gtest.h>

namespace tokenmill::sched {
namespace {

// The true cost of the steps fed below: 10 ms + 2 ms per decode row + 0.5 ms per prefill token.
double true_ms(int64_t decodes, int64_t prefill) { return 10.0 + 2.0 * decodes + 0.5 * prefill; }

TEST(StepCostModel, RecoversALinearCost) {
  StepCostModel m;
  EXPECT_FALSE(m.measured());
  for (int i = 0; i < 200; ++i) {
    const int64_t d = 1 + i % 8;
    m.observe(d, 0, true_ms(d, 0));
    if (i == 0) EXPECT_FALSE(m.measured());  // no prefill step yet
    const int64_t p = 64 + 32 * (i % 5);
    m.observe(i % 3, p, true_ms(i % 3, p));
  }
  EXPECT_TRUE(m.measured());
  EXPECT_NEAR(m.fixed_ms(), 10.0, 0.5);
  EXPECT_NEAR(m.per_decode_ms(), 2.0, 0.1);
  EXPECT_NEAR(m.per_prefill_token_ms(), 0.5, 0.02);
  EXPECT_NEAR(m.step_ms(4, 256), true_ms(4, 256), 0.05 * true_ms(4, 256));
}

TEST(StepCostModel, FollowsAChangedCost) {
  StepCostModel m;
  for (int i = 0; i < 100; ++i) {
    m.observe(1 + i % 4, 0, true_ms(1 + i % 4, 0));
    m.observe(0, 128, true_ms(0, 128));
  }
  // The machine gets twice as slow (another job took a core): old steps are forgotten.
  for (int i = 0; i < 300; ++i) {
    m.observe(1 + i % 4, 0, 2 * true_ms(1 + i % 4, 0));
    m.observe(0, 128, 2 * true_ms(0, 128));
  }
  EXPECT_NEAR(m.step_ms(2, 0), 2 * true_ms(2, 0), 0.05 * 2 * true_ms(2, 0));
  EXPECT_NEAR(m.step_ms(0, 128), 2 * true_ms(0, 128), 0.05 * 2 * true_ms(0, 128));
}

TEST(StepCostModel, IgnoresEmptyAndBadSteps) {
  StepCostModel m;
  m.observe(0, 0, 5.0);
  m.observe(2, 0, 0.0);
  m.observe(2, 0, -1.0);
  m.observe(-1, 4, 3.0);
  EXPECT_FALSE(m.measured());
  EXPECT_EQ(m.step_ms(4, 100), 0.0);
}

}  // namespace
}  // namespace tokenmill::sched
