#include "console/console_status.h"

#include <gtest/gtest.h>

namespace tokenmill::console {
namespace {

using nlohmann::json;

TEST(ConsoleStatus, WhileLoadingOnlyTheServerSideIsReported) {
  StatusInputs in;
  in.state = "loading";
  in.now_s = 1000;
  in.started_s = 990;
  in.memory = {123, 456};
  const json s = status_json(in);
  EXPECT_EQ(s["state"], "loading");
  EXPECT_DOUBLE_EQ(s["uptime_s"].get<double>(), 10);
  EXPECT_TRUE(s["server"].is_null());
  EXPECT_EQ(s["memory"]["resident_bytes"], 123);
  EXPECT_EQ(s["memory"]["high_water_bytes"], 456);
  EXPECT_FALSE(s.contains("requests"));
  EXPECT_FALSE(s.contains("latency_ms"));
}

TEST(ConsoleStatus, EngineCountersGaugesAndHistogramsAsTheyAre) {
  engine::MetricsSnapshot m;
  m.requests_submitted = 9;
  m.requests_finished[static_cast<int>(sched::FinishReason::kLength)] = 5;
  m.requests_finished[static_cast<int>(sched::FinishReason::kCancelled)] = 1;
  m.requests_rejected[static_cast<int>(sched::RejectReason::kQueueFull)] = 2;
  m.running = 3;
  m.waiting = 4;
  m.generated_tokens = 77;
  m.kv_blocks_total = 100;
  m.kv_blocks_used = 30;
  m.kv_blocks_high_water = 60;
  m.kv_dtype = "q8_0";
  m.prefix_cache_hit_tokens = 10;
  m.prefix_cache_miss_tokens = 30;
  m.ttft_ms = engine::Histogram::with_bounds({1, 10, 100});
  for (double v : {0.5, 5.0, 50.0, 500.0}) m.ttft_ms.observe(v);
  StatusInputs in;
  in.state = "ready";
  in.engine = m;
  in.http.responses[{"/v1/chat/completions", 200}] = 6;
  in.http.responses[{"/v1/chat/completions", 429}] = 2;
  in.server = {{"model", "tiny"}};
  const json s = status_json(in);
  EXPECT_EQ(s["server"]["model"], "tiny");
  EXPECT_EQ(s["requests"]["running"], 3);
  EXPECT_EQ(s["requests"]["waiting"], 4);
  EXPECT_EQ(s["requests"]["finished"]["length"], 5);
  EXPECT_EQ(s["requests"]["finished"]["cancelled"], 1);
  EXPECT_EQ(s["requests"]["finished_total"], 6);
  EXPECT_EQ(s["requests"]["rejected"]["queue_full"], 2);
  EXPECT_EQ(s["requests"]["rejected_total"], 2);
  EXPECT_FALSE(s["requests"]["finished"].contains("stop"));  // only reasons that happened
  EXPECT_EQ(s["tokens"]["generated"], 77);
  EXPECT_EQ(s["kv"]["blocks_used"], 30);
  EXPECT_EQ(s["kv"]["blocks_high_water"], 60);
  EXPECT_EQ(s["kv"]["dtype"], "q8_0");
  EXPECT_EQ(s["prefix_cache"]["hit_tokens"], 10);
  const json& h = s["latency_ms"]["ttft"];
  EXPECT_EQ(h["bounds"], json({1.0, 10.0, 100.0}));
  EXPECT_EQ(h["counts"], json({1, 1, 1, 1}));
  EXPECT_EQ(h["count"], 4);
  EXPECT_DOUBLE_EQ(h["sum"].get<double>(), 555.5);
  ASSERT_EQ(s["http"]["responses"].size(), 2u);
  EXPECT_EQ(s["http"]["responses"][1]["status"], 429);
  EXPECT_EQ(s["http"]["responses"][1]["count"], 2);
}

}  // namespace
}  // namespace tokenmill::console
