#include "engine/slo_calibration.h"

#include <gtest/gtest.h>

#include "engine/engine.h"
#include "engine/test_util.h"

namespace tokenmill::engine {
namespace {

using testing::greedy_request;
using testing::tiny_config;

// With a target, the gate has measured costs before the first request, and
// the calibration's own requests are nowhere in the metrics.
TEST(SloCalibration, TheGateForecastsFromTheFirstRequest) {
  EngineConfig config = tiny_config();
  config.slo.ttft_ms = 10'000;
  Engine engine(config);
  const MetricsSnapshot m = engine.metrics();
  EXPECT_GT(m.slo_step_fixed_ms, 0.0);
  EXPECT_GT(m.slo_step_per_prefill_token_ms, 0.0);
  EXPECT_EQ(m.requests_submitted, 0u);
  EXPECT_EQ(m.requests_finished_total(), 0u);
  EXPECT_EQ(m.ttft_ms.count, 0u);
  EXPECT_EQ(m.prefill_tokens, 0u);
  EXPECT_EQ(m.kv_blocks_used, 0);
  EXPECT_GT(m.kv_blocks_total, 0);  // gauges kept
  // The first request is forecast (and, with a generous target, admitted).
  const GenerationResult r = engine.submit(greedy_request({1, 20, 30}, 4)).wait();
  EXPECT_EQ(r.tokens.size(), 4u);
  const MetricsSnapshot after = engine.metrics();
  EXPECT_EQ(after.requests_submitted, 1u);
  EXPECT_EQ(after.slo_prediction[static_cast<size_t>(SloMetric::kTtft)].count, 1u);
}

// Without it (a test of the uncalibrated gate) nothing runs at start.
TEST(SloCalibration, OffLeavesTheModelUnmeasured) {
  EngineConfig config = tiny_config();
  config.slo.ttft_ms = 10'000;
  config.slo_calibration = false;
  Engine engine(config);
  EXPECT_EQ(engine.metrics().slo_step_fixed_ms, 0.0);
  Engine plain(tiny_config());  // no target: no calibration either
  EXPECT_EQ(plain.metrics().slo_step_fixed_ms, 0.0);
}

}  // namespace
}  // namespace tokenmill::engine
