#include "engine/metrics.h"

#include <gtest/gtest.h>

namespace tokenmill::engine {
namespace {

TEST(HistogramTest, BucketsAreUpperInclusive) {
  Histogram h = Histogram::with_bounds({1, 10, 100});
  for (double v : {0.5, 1.0, 1.5, 10.0, 50.0, 100.0, 1000.0}) h.observe(v);
  EXPECT_EQ(h.counts, (std::vector<uint64_t>{2, 2, 2, 1}));
  EXPECT_EQ(h.count, 7u);
  EXPECT_DOUBLE_EQ(h.sum, 1163.0);
  EXPECT_DOUBLE_EQ(h.mean(), 1163.0 / 7);
}

TEST(HistogramTest, QuantileInterpolatesInsideTheBucket) {
  Histogram h = Histogram::with_bounds({10, 20});
  EXPECT_EQ(h.quantile(0.5), 0.0);
  for (int i = 0; i < 4; ++i) h.observe(15);  // all in (10, 20]
  // The median is half-way through the bucket's mass: 10 + 10 * 0.5.
  EXPECT_DOUBLE_EQ(h.quantile(0.5), 15.0);
  EXPECT_DOUBLE_EQ(h.quantile(1.0), 20.0);
  h.observe(100);  // overflow bucket: reported at its lower edge
  EXPECT_DOUBLE_EQ(h.quantile(1.0), 20.0);
}

TEST(MetricsTest, CountersAndGaugesAddUp) {
  Metrics m;
  m.on_submit();
  m.on_submit();
  m.on_submit();
  m.on_reject(RejectReason::kKvNeverFits);
  FinalEvent rejected;
  rejected.reason = FinishReason::kRejected;
  m.on_finish(rejected);
  FinalEvent done;
  done.reason = FinishReason::kLength;
  done.usage = {10, 4, 3};
  done.timings.ttft_ms = 12;
  done.timings.tpot_ms = 3;
  done.timings.e2e_ms = 18;
  m.on_finish(done);
  m.on_step({2, 6, 1, 2, 5.0});
  m.on_step({1, 0, 1, 1, 1.0});
  SchedulerGauges g;
  g.running = 1;
  g.kv_blocks_total = 10;
  g.kv_blocks_used = 0;
  g.kv_blocks_free = 8;
  g.kv_blocks_evictable = 2;
  g.kv_blocks_high_water = 4;
  g.preemptions = 2;
  m.set_scheduler_gauges(g);

  const MetricsSnapshot s = m.snapshot();
  EXPECT_EQ(s.requests_submitted, 3u);
  EXPECT_EQ(s.requests_rejected_total(), 1u);
  EXPECT_EQ(s.requests_rejected[static_cast<size_t>(RejectReason::kKvNeverFits)], 1u);
  EXPECT_EQ(s.requests_finished_total(), 2u);
  EXPECT_EQ(s.requests_finished[static_cast<size_t>(FinishReason::kLength)], 1u);
  EXPECT_EQ(s.prompt_tokens, 10u);
  EXPECT_EQ(s.cached_prompt_tokens, 4u);
  EXPECT_EQ(s.steps, 2u);
  EXPECT_EQ(s.prefill_tokens, 6u);
  EXPECT_EQ(s.decode_tokens, 2u);
  EXPECT_EQ(s.generated_tokens, 3u);
  EXPECT_DOUBLE_EQ(s.step_seconds, 0.006);
  EXPECT_EQ(s.ttft_ms.count, 1u);  // the rejection has no latencies
  EXPECT_EQ(s.tpot_ms.count, 1u);
  EXPECT_EQ(s.e2e_ms.count, 1u);
  EXPECT_EQ(s.running, 1);
  EXPECT_EQ(s.kv_blocks_total, 10);
  EXPECT_EQ(s.kv_blocks_used, 0);
  EXPECT_EQ(s.kv_blocks_free, 8);
  EXPECT_EQ(s.kv_blocks_evictable, 2);
  EXPECT_EQ(s.kv_blocks_high_water, 4);
  EXPECT_EQ(s.preemptions, 2u);
  EXPECT_EQ(s.last_step.step_ms, 1.0);
}

kv::PrefixMissCounts misses(kv::PrefixMissReason reason, int64_t n) {
  kv::PrefixMissCounts m{};
  m[static_cast<size_t>(reason)] = n;
  return m;
}

// Hits are worth the prefill cost per token measured so far (0 before any
// prefill step); tenants beyond the first 64 share "_other".
TEST(MetricsTest, PrefixLookupsByTenantWithBoundedLabels) {
  Metrics m;
  m.on_prefix_lookup("a", "", 16, misses(kv::PrefixMissReason::kNoOverlap, 4));
  StepStats prefill;
  prefill.prefill_tokens = 90;
  prefill.decode_tokens = 10;
  prefill.forward_ms = 50;  // 0.5 ms per token
  m.on_step(prefill);
  m.on_prefix_lookup("a", "", 32, misses(kv::PrefixMissReason::kPartialBlock, 3));
  m.on_prefix_lookup("", "", 0, misses(kv::PrefixMissReason::kIsolated, 7));
  for (int i = 0; i < 70; ++i) {
    std::string tenant = "t";
    tenant += std::to_string(i);
    m.on_prefix_lookup(tenant, "", 1, {});
  }
  const MetricsSnapshot s = m.snapshot();
  EXPECT_DOUBLE_EQ(s.prefill_seconds_per_token, 0.0005);
  EXPECT_NEAR(s.prefix_cache_saved_prefill_seconds, (32 + 70) * 0.0005, 1e-12);
  ASSERT_EQ(s.prefix_by_tenant.size(), kMaxTenantLabels + 1);
  const PrefixStats& a = s.prefix_by_tenant[0];
  EXPECT_EQ(a.label, "a");
  EXPECT_EQ(a.hit_tokens, 48u);
  EXPECT_EQ(a.miss_tokens[static_cast<size_t>(kv::PrefixMissReason::kNoOverlap)], 4u);
  EXPECT_EQ(a.miss_tokens[static_cast<size_t>(kv::PrefixMissReason::kPartialBlock)], 3u);
  EXPECT_EQ(s.prefix_by_tenant[1].label, "");
  EXPECT_EQ(s.prefix_by_tenant[1].miss_tokens[static_cast<size_t>(kv::PrefixMissReason::kIsolated)], 7u);
  const PrefixStats& other = s.prefix_by_tenant.back();
  EXPECT_EQ(other.label, kOtherTenants);
  EXPECT_EQ(other.hit_tokens, 70u - 62u);  // 2 + 62 tenants have their own label
  // Every lookup above was on the base model: one adapter label, "".
  ASSERT_EQ(s.prefix_by_adapter.size(), 1u);
  EXPECT_EQ(s.prefix_by_adapter[0].label, "");
  EXPECT_EQ(s.prefix_by_adapter[0].hit_tokens, 16u + 32u + 70u);
}

TEST(MetricsTest, PrefixLookupsByAdapter) {
  Metrics m;
  m.on_prefix_lookup("t", "fr", 8, misses(kv::PrefixMissReason::kIsolated, 5));
  m.on_prefix_lookup("t", "", 3, {});
  m.on_prefix_lookup("u", "fr", 2, {});
  const MetricsSnapshot s = m.snapshot();
  ASSERT_EQ(s.prefix_by_adapter.size(), 2u);
  EXPECT_EQ(s.prefix_by_adapter[0].label, "fr");
  EXPECT_EQ(s.prefix_by_adapter[0].hit_tokens, 10u);
  EXPECT_EQ(s.prefix_by_adapter[0].miss_tokens[static_cast<size_t>(kv::PrefixMissReason::kIsolated)], 5u);
  EXPECT_EQ(s.prefix_by_adapter[1].label, "");
  EXPECT_EQ(s.prefix_by_adapter[1].hit_tokens, 3u);
  ASSERT_EQ(s.prefix_by_tenant.size(), 2u);
  EXPECT_EQ(s.prefix_by_tenant[0].hit_tokens, 11u);
}

}  // namespace
}  // namespace tokenmill::engine
