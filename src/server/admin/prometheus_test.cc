#include "server/admin/prometheus.h"

#include <gtest/gtest.h>

namespace tokenmill::server {
namespace {

bool has_line(const std::string& text, const std::string& line) {
  return text.find("\n" + line + "\n") != std::string::npos || text.rfind(line + "\n", 0) == 0;
}

TEST(Prometheus, Numbers) {
  EXPECT_EQ(prometheus_number(0.25), "0.25");
  EXPECT_EQ(prometheus_number(3), "3");
  EXPECT_EQ(prometheus_number(1.0 / 0.0), "+Inf");
  EXPECT_EQ(prometheus_label("path", "a\"b\\c\nd"), "path=\"a\\\"b\\\\c\\nd\"");
}

// Buckets are cumulative and exported in seconds: observations 0.5, 2, 3
// and 50 ms against bounds 1, 4, 10 ms.
TEST(Prometheus, HistogramCumulativeSeconds) {
  engine::Histogram h = engine::Histogram::with_bounds({1, 4, 10});
  for (double v : {0.5, 2.0, 3.0, 50.0}) h.observe(v);
  PrometheusWriter w;
  w.histogram_ms("x_seconds", "help text", h);
  const std::string& t = w.text();
  EXPECT_TRUE(has_line(t, "# TYPE x_seconds histogram")) << t;
  EXPECT_TRUE(has_line(t, "x_seconds_bucket{le=\"0.001\"} 1")) << t;
  EXPECT_TRUE(has_line(t, "x_seconds_bucket{le=\"0.004\"} 3")) << t;
  EXPECT_TRUE(has_line(t, "x_seconds_bucket{le=\"0.01\"} 3")) << t;
  EXPECT_TRUE(has_line(t, "x_seconds_bucket{le=\"+Inf\"} 4")) << t;
  EXPECT_TRUE(has_line(t, "x_seconds_sum 0.0555")) << t;
  EXPECT_TRUE(has_line(t, "x_seconds_count 4")) << t;
}

TEST(Prometheus, FullRender) {
  engine::MetricsSnapshot m;
  m.ttft_ms = engine::Histogram::with_bounds(engine::latency_bounds_ms());
  m.running = 2;
  m.waiting = 1;
  m.kv_blocks_used = 7;
  m.kv_blocks_total = 64;
  m.kv_dtype = "q8_0";
  m.kv_bytes_per_token = 9792;
  m.kv_bytes_total = 64 * 16 * 9792;
  m.paused = 3;
  m.prefix_cache_blocks = 12;
  m.prefix_cache_saved_prefill_seconds = 0.5;
  engine::PrefixStats acme{"acme"};
  acme.hit_tokens = 30;
  acme.miss_tokens[static_cast<size_t>(kv::PrefixMissReason::kNoOverlap)] = 6;
  acme.miss_tokens[static_cast<size_t>(kv::PrefixMissReason::kPartialBlock)] = 4;
  m.prefix_by_tenant.push_back(acme);
  m.requests_finished[static_cast<size_t>(engine::FinishReason::kCancelled)] = 3;
  m.requests_rejected[static_cast<size_t>(engine::RejectReason::kQueueFull)] = 2;
  HttpStatsSnapshot http;
  http.responses[{"/v1/completions", 200}] = 5;
  http.responses[{"/v1/completions", 429}] = 2;
  const std::string t = render_metrics(m, http, "ready", ProcessMemory{4096, 8192});
  EXPECT_TRUE(has_line(t, "tokenmill_requests_running 2"));
  EXPECT_TRUE(has_line(t, "tokenmill_requests_waiting 1"));
  EXPECT_TRUE(has_line(t, "tokenmill_kv_blocks_used 7"));
  EXPECT_TRUE(has_line(t, "tokenmill_kv_blocks_total 64"));
  EXPECT_TRUE(has_line(t, "tokenmill_prefix_cache_hit_ratio 0.75"));
  EXPECT_TRUE(has_line(t, "tokenmill_requests_paused 3")) << t;
  EXPECT_TRUE(has_line(t, "tokenmill_prefix_cache_blocks 12")) << t;
  EXPECT_TRUE(has_line(t, "tokenmill_prefix_cache_saved_prefill_seconds_total 0.5")) << t;
  EXPECT_TRUE(has_line(t, "tokenmill_prefix_cache_hit_tokens_total{tenant=\"acme\"} 30")) << t;
  EXPECT_TRUE(has_line(t, "tokenmill_prefix_cache_miss_tokens_total{tenant=\"acme\",reason=\"no_overlap\"} 6")) << t;
  EXPECT_TRUE(has_line(t, "tokenmill_prefix_cache_miss_tokens_total{tenant=\"acme\",reason=\"partial_block\"} 4")) << t;
  EXPECT_TRUE(has_line(t, "tokenmill_prefix_cache_miss_tokens_total{tenant=\"acme\",reason=\"evicted\"} 0")) << t;
  EXPECT_TRUE(has_line(t, "tokenmill_kv_bytes_per_token 9792")) << t;
  EXPECT_TRUE(has_line(t, "tokenmill_kv_cache_bytes 10027008")) << t;
  EXPECT_TRUE(has_line(t, "tokenmill_kv_cache_info{dtype=\"q8_0\"} 1")) << t;
  EXPECT_TRUE(has_line(t, "tokenmill_requests_finished_total{reason=\"cancelled\"} 3"));
  EXPECT_TRUE(has_line(t, "tokenmill_requests_rejected_total{reason=\"queue_full\"} 2"));
  EXPECT_TRUE(has_line(t, "tokenmill_http_responses_total{endpoint=\"/v1/completions\",code=\"429\"} 2"));
  EXPECT_TRUE(has_line(t, "tokenmill_server_state{state=\"ready\"} 1"));
  EXPECT_TRUE(has_line(t, "# TYPE tokenmill_time_to_first_token_seconds histogram"));
  EXPECT_TRUE(has_line(t, "process_resident_memory_bytes 4096"));
  EXPECT_TRUE(has_line(t, "tokenmill_process_resident_memory_high_water_bytes 8192"));
  // Every family is declared once.
  size_t pos = 0, count = 0;
  while ((pos = t.find("# TYPE tokenmill_requests_finished_total ", pos)) != std::string::npos) ++count, ++pos;
  EXPECT_EQ(count, 1u);
}

// Tenant labels are escaped; the empty tenant is labelled "", and every
// reason of every tenant has its sample.
TEST(Prometheus, PrefixCacheByTenantAndReason) {
  engine::MetricsSnapshot m;
  m.prefix_by_tenant.push_back(engine::PrefixStats{"", 5});
  m.prefix_by_tenant.push_back(engine::PrefixStats{"we\"ird\\\n", 7});
  m.prefix_by_tenant.push_back(engine::PrefixStats{std::string(engine::kOtherTenants), 1});
  m.prefix_by_tenant[1].miss_tokens[static_cast<size_t>(kv::PrefixMissReason::kIsolated)] = 9;
  const std::string t = render_metrics(m, HttpStatsSnapshot{}, "ready", ProcessMemory{});
  EXPECT_TRUE(has_line(t, "tokenmill_prefix_cache_hit_tokens_total{tenant=\"\"} 5")) << t;
  EXPECT_TRUE(has_line(t, "tokenmill_prefix_cache_hit_tokens_total{tenant=\"we\\\"ird\\\\\\n\"} 7")) << t;
  EXPECT_TRUE(has_line(t, "tokenmill_prefix_cache_hit_tokens_total{tenant=\"_other\"} 1")) << t;
  EXPECT_TRUE(
      has_line(t, "tokenmill_prefix_cache_miss_tokens_total{tenant=\"we\\\"ird\\\\\\n\",reason=\"isolated\"} 9"))
      << t;
  size_t samples = 0;
  for (size_t pos = 0; (pos = t.find("\ntokenmill_prefix_cache_miss_tokens_total{", pos)) != std::string::npos; ++pos)
    ++samples;
  EXPECT_EQ(samples, 3u * kv::kNumPrefixMissReasons);
  EXPECT_TRUE(has_line(t, "tokenmill_prefix_cache_hit_ratio " + prometheus_number(13.0 / 22.0))) << t;
}

// The same split by LoRA adapter ("" = the base model), the adapter
// table's gauges and the requests per adapter.
TEST(Prometheus, LoraAdapters) {
  engine::MetricsSnapshot m;
  m.prefix_by_adapter.push_back(engine::PrefixStats{"", 11});
  m.prefix_by_adapter.push_back(engine::PrefixStats{"sql", 4});
  m.prefix_by_adapter[1].miss_tokens[static_cast<size_t>(kv::PrefixMissReason::kIsolated)] = 32;
  LoraServingStats lora;
  lora.loaded = 3;
  lora.draining = 1;
  lora.requests = {{"sql", 7}, {"chat", 2}};
  const std::string t = render_metrics(m, HttpStatsSnapshot{}, "ready", ProcessMemory{}, lora);
  EXPECT_TRUE(has_line(t, "tokenmill_adapter_prefix_cache_hit_tokens_total{adapter=\"\"} 11")) << t;
  EXPECT_TRUE(has_line(t, "tokenmill_adapter_prefix_cache_hit_tokens_total{adapter=\"sql\"} 4")) << t;
  EXPECT_TRUE(has_line(t, "tokenmill_adapter_prefix_cache_miss_tokens_total{adapter=\"sql\",reason=\"isolated\"} 32"))
      << t;
  EXPECT_TRUE(has_line(t, "tokenmill_adapter_prefix_cache_miss_tokens_total{adapter=\"\",reason=\"no_overlap\"} 0"))
      << t;
  EXPECT_TRUE(has_line(t, "# TYPE tokenmill_adapter_prefix_cache_miss_tokens_total counter")) << t;
  EXPECT_TRUE(has_line(t, "tokenmill_lora_adapters_loaded 3")) << t;
  EXPECT_TRUE(has_line(t, "tokenmill_lora_adapters_draining 1")) << t;
  EXPECT_TRUE(has_line(t, "tokenmill_adapter_requests_total{adapter=\"sql\"} 7")) << t;
  EXPECT_TRUE(has_line(t, "tokenmill_adapter_requests_total{adapter=\"chat\"} 2")) << t;
  // The per-tenant series stay as they were.
  EXPECT_EQ(t.find("tokenmill_prefix_cache_hit_tokens_total{adapter"), std::string::npos) << t;
}

TEST(Prometheus, KvLayoutBeforeTheEngineStarts) {
  const std::string t = render_metrics(engine::MetricsSnapshot{}, HttpStatsSnapshot{}, "loading", ProcessMemory{});
  EXPECT_TRUE(has_line(t, "tokenmill_kv_bytes_per_token 0")) << t;
  EXPECT_TRUE(has_line(t, "# TYPE tokenmill_kv_cache_info gauge")) << t;
  EXPECT_EQ(t.find("tokenmill_kv_cache_info{"), std::string::npos) << t;
}

TEST(Prometheus, ProcessStatus) {
  const ProcessMemory m = parse_process_status("Name:\ttokenmill\nVmHWM:\t  2048 kB\nVmRSS:\t  1024 kB\nThreads: 3\n");
  EXPECT_EQ(m.resident, 1024 * 1024);
  EXPECT_EQ(m.resident_high_water, 2048 * 1024);
  EXPECT_GT(read_process_memory().resident, 0);
}

TEST(HttpStats, EndpointLabels) {
  EXPECT_EQ(endpoint_label("/v1/completions"), "/v1/completions");
  EXPECT_EQ(endpoint_label("/v1/models/tiny"), "/v1/models/{id}");
  EXPECT_EQ(endpoint_label("/wp-admin.php"), "other");
  EXPECT_EQ(endpoint_label("/v1/load_lora_adapter"), "/v1/load_lora_adapter");
  EXPECT_EQ(endpoint_label("/lora-adapters"), "/lora-adapters");
  EXPECT_EQ(endpoint_label("/console/api/status"), "/console/api/status");
  EXPECT_EQ(endpoint_label("/console/chat.js"), "/console/{asset}");
}

}  // namespace
}  // namespace tokenmill::server

namespace tokenmill::server {
namespace {

TEST(Prometheus, ExpertLoadOnlyForMixtureOfExperts) {
  engine::MetricsSnapshot m;
  EXPECT_EQ(render_metrics(m, HttpStatsSnapshot{}, "ready", ProcessMemory{}).find("tokenmill_moe_"), std::string::npos);
  m.expert_tokens = {10, 30, 0};
  m.last_step.expert_tokens = {1, 3, 0};
  m.last_step.expert_imbalance = 2.25;
  m.expert_imbalance_sum = 6.0;
  m.expert_steps = 4;
  const std::string t = render_metrics(m, HttpStatsSnapshot{}, "ready", ProcessMemory{});
  EXPECT_NE(t.find("tokenmill_moe_expert_tokens_total{expert=\"1\"} 30\n"), std::string::npos) << t;
  EXPECT_NE(t.find("tokenmill_moe_step_expert_tokens{expert=\"2\"} 0\n"), std::string::npos);
  EXPECT_NE(t.find("tokenmill_moe_expert_imbalance 2.25\n"), std::string::npos);
  EXPECT_NE(t.find("tokenmill_moe_expert_imbalance_mean 1.5\n"), std::string::npos);
}

}  // namespace
}  // namespace tokenmill::server
