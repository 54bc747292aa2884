#include "bench/traffic_spec.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "util/error.h"

namespace tokenmill::bench {
namespace {

// The issue's example, as written.
constexpr const char* kSeedSpec = R"(
inference_benchmark: ib_20260820_47
traffic:
  concurrency: [1, 8, 32, 64]
  arrival: poisson_with_burst
  length_buckets: [[0,512],[513,2048],[2049,8192]]
  cache_hit_rate: [0.0, 0.5, 0.9]
controls:
  warmup_requests: 200
  random_seed: 8842
  hardware: a10g-24gb
  driver: cuda-12.4
report: [queue_ms, ttft_ms, tpot_ms, p95_ms, p99_ms, oom_rate, cost_per_success]
gates:
  quality_regression: 0
  p99_budget_breach: false
decision: compare_under_same_shape
)";

TEST(TrafficSpec, ParsesTheSeedSpecAsWritten) {
  const TrafficSpec s = parse_traffic_spec(kSeedSpec, "seed.yaml");
  EXPECT_EQ(s.name, "ib_20260820_47");
  EXPECT_EQ(s.concurrency, (std::vector<int64_t>{1, 8, 32, 64}));
  EXPECT_EQ(s.arrival, ArrivalKind::kPoissonWithBurst);
  ASSERT_EQ(s.input_buckets.size(), 3u);
  EXPECT_EQ(s.input_buckets[1].min, 513);
  EXPECT_EQ(s.input_buckets[2].max, 8192);
  EXPECT_EQ(s.input_weights, (std::vector<double>{1, 1, 1}));
  EXPECT_EQ(s.cache_hit_rates, (std::vector<double>{0.0, 0.5, 0.9}));
  EXPECT_EQ(s.warmup_requests, 200);
  EXPECT_EQ(s.seed, 8842u);
  EXPECT_EQ(s.hardware, "a10g-24gb");
  EXPECT_EQ(s.driver, "cuda-12.4");
  EXPECT_EQ(s.report_metrics.size(), 7u);
  EXPECT_EQ(s.gates.quality_regression, 0.0);
  EXPECT_FALSE(s.gates.p99_budget_breach);
  EXPECT_EQ(s.decision, "compare_under_same_shape");
  EXPECT_EQ(s.token_counter, TokenCounterKind::kServer);
}

// Each bad spec must fail with a message naming the field.
struct BadCase {
  std::string yaml;
  std::string field;
};

TEST(TrafficSpec, InvalidSpecsNameTheField) {
  const std::vector<BadCase> cases = {
      {"traffic: {concurrency: [1]}", "inference_benchmark"},
      {"inference_benchmark: x\ntraffic: {concurrency: [1, 0]}", "traffic.concurrency[1]"},
      {"inference_benchmark: x\ntraffic: {concurrency: [1, abc]}", "traffic.concurrency[1]"},
      {"inference_benchmark: x\ntraffic: {concurency: [1]}", "traffic.concurency"},
      {"inference_benchmark: x\ntraffic: {arrival: poison}", "traffic.arrival"},
      {"inference_benchmark: x\ntraffic: {length_buckets: [[10, 5]]}", "traffic.length_buckets[0]"},
      {"inference_benchmark: x\ntraffic: {length_buckets: [[1, 2, 3]]}", "traffic.length_buckets[0]"},
      {"inference_benchmark: x\ntraffic: {length_buckets: [[1, 5]], length_bucket_weights: [1, 2]}",
       "traffic.length_bucket_weights"},
      {"inference_benchmark: x\ntraffic: {cache_hit_rate: [0.5, 1.5]}", "traffic.cache_hit_rate[1]"},
      {"inference_benchmark: x\ntraffic: {rate: -1}", "traffic.rate"},
      {"inference_benchmark: x\ntraffic: {burst: {length_s: 20, period_s: 10}}", "traffic.burst.length_s"},
      {"inference_benchmark: x\ntraffic: {cancel_rate: 2}", "traffic.cancel_rate"},
      {"inference_benchmark: x\ncontrols: {random_seed: -3}", "controls.random_seed"},
      {"inference_benchmark: x\ncontrols: {warmup: 3}", "controls.warmup"},
      {"inference_benchmark: x\nreport: [ttft_ms, speed]", "report"},
      {"inference_benchmark: x\ngates: {p99_budget_breach: maybe}", "gates.p99_budget_breach"},
      {"inference_benchmark: x\ndecision: flip_a_coin", "decision"},
      {"inference_benchmark: x\ntarget: {endpoint: embeddings}", "target.endpoint"},
      {"inference_benchmark: x\nprompts: {source: jsonl}", "prompts.path"},
      {"inference_benchmark: x\nprompts: {token_counter: gguf}", "prompts.tokenizer"},
      {"inference_benchmark: x\ntraffic: {arrival: replay}", "traffic.arrival"},
      {"inference_benchmark: x\ntraffic: {shared_prefix_tokens: 300, length_buckets: [[1, 200]]}",
       "traffic.shared_prefix_tokens"},
      {"inference_benchmark: x\ncost: {usd_per_hour: cheap}", "cost.usd_per_hour"},
      {"inference_benchmark: x\ntraffic: [1, 2]", "traffic"},
      {"inference_benchmark: x\nsurprise: 1", "surprise"},
      {"inference_benchmark: x\ntraffic: {concurrency: [1\n", "line"},
  };
  for (const BadCase& c : cases) {
    try {
      parse_traffic_spec(c.yaml, "bad.yaml");
      ADD_FAILURE() << "accepted: " << c.yaml;
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(c.field), std::string::npos) << "message '" << msg << "' does not name " << c.field;
      EXPECT_EQ(msg.rfind("bad.yaml", 0), 0u) << msg;
    }
  }
}

TEST(TrafficSpec, DefaultsAndOverrides) {
  const TrafficSpec s = parse_traffic_spec(
      "inference_benchmark: x\ntraffic: {concurrency: 4}", "a.yaml",
      {"traffic.requests_per_cell=7", "traffic.concurrency=[2, 3]", "controls.random_seed=5", "cost.usd_per_hour=1.5"});
  EXPECT_EQ(s.concurrency, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(s.requests_per_cell, 7);
  EXPECT_EQ(s.seed, 5u);
  EXPECT_DOUBLE_EQ(s.usd_per_hour, 1.5);
  EXPECT_EQ(s.arrival, ArrivalKind::kPoisson);
  EXPECT_TRUE(s.stream);
  EXPECT_THROW(parse_traffic_spec("inference_benchmark: x", "a.yaml", {"novalue"}), Error);
  EXPECT_THROW(parse_traffic_spec("inference_benchmark: x", "a.yaml", {"traffic.concurency=3"}), Error);
}

// The seeds' online targets (benchmarks/specs/seed_online_targets.yaml):
// every SLO the capacity search judges at p99, and an absolute P99 gate.
TEST(TrafficSpec, ParsesSlosAndAnAbsoluteP99Budget) {
  const TrafficSpec s = parse_traffic_spec(
      "inference_benchmark: x\nslo: {ttft_ms: 500, tpot_ms: 33, e2e_ms: 5000}\n"
      "gates: {p99_budget_breach: false, p99_budget_ms: 5000}",
      "a.yaml");
  EXPECT_DOUBLE_EQ(s.slo.ttft_ms, 500);
  EXPECT_DOUBLE_EQ(s.slo.tpot_ms, 33);
  EXPECT_DOUBLE_EQ(s.slo.e2e_ms, 5000);
  EXPECT_DOUBLE_EQ(s.gates.p99_budget_ms, 5000);
  EXPECT_FALSE(s.gates.p99_budget_breach);
  EXPECT_DOUBLE_EQ(parse_traffic_spec("inference_benchmark: x", "b.yaml").slo.e2e_ms, 0);  // off by default
  EXPECT_THROW(parse_traffic_spec("inference_benchmark: x\nslo: {e2e_ms: -1}", "c.yaml"), Error);
  EXPECT_THROW(parse_traffic_spec("inference_benchmark: x\nslo: {e2e_p99_ms: 5000}", "d.yaml"), Error);
}

TEST(TrafficSpec, ShapeHashFollowsTheShapeOnly) {
  const TrafficSpec a = parse_traffic_spec(kSeedSpec, "a.yaml");
  const TrafficSpec same_shape = parse_traffic_spec(
      kSeedSpec, "b.yaml",
      {"controls.hardware=h200", "cost.usd_per_hour=3", "target.url=http://10.0.0.1:9000", "gates.p99_budget_ms=100"});
  const TrafficSpec other_seed = parse_traffic_spec(kSeedSpec, "c.yaml", {"controls.random_seed=1"});
  const TrafficSpec other_rate = parse_traffic_spec(kSeedSpec, "d.yaml", {"traffic.rate=2"});
  EXPECT_EQ(traffic_shape_hash(a), traffic_shape_hash(same_shape));
  EXPECT_NE(traffic_shape_hash(a), traffic_shape_hash(other_seed));
  EXPECT_NE(traffic_shape_hash(a), traffic_shape_hash(other_rate));
  EXPECT_EQ(traffic_shape_hash(a).size(), 16u);
  EXPECT_EQ(traffic_shape_json(a)["arrival"], "poisson_with_burst");
}

}  // namespace
}  // namespace tokenmill::bench
