#include "bench/server_monitor.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <unistd.h>

#include <chrono>
#include <mutex>
#include <string>
#include <thread>

namespace tokenmill::bench {
namespace {

TEST(Prometheus, ParsesNamesLabelsAndSums) {
  const auto m = parse_prometheus_text(
      "# HELP tokenmill_prefix_cache_hit_tokens_total Prompt tokens found.\n"
      "# TYPE tokenmill_prefix_cache_hit_tokens_total counter\n"
      "tokenmill_prefix_cache_hit_tokens_total 1200\n"
      "tokenmill_requests_finished_total{reason=\"stop\"} 3\n"
      "tokenmill_requests_finished_total{reason=\"a}b\\\"c\"} 4 1700000000000\n"
      "process_resident_memory_bytes 1.5e+08\n"
      "broken_line\n"
      "nan_value NaN\n");
  EXPECT_DOUBLE_EQ(m.at("tokenmill_prefix_cache_hit_tokens_total"), 1200);
  EXPECT_DOUBLE_EQ(m.at("tokenmill_requests_finished_total"), 7);
  EXPECT_DOUBLE_EQ(m.at("process_resident_memory_bytes"), 1.5e8);
  EXPECT_EQ(m.count("broken_line"), 0u);
  EXPECT_EQ(m.count("nan_value"), 0u);
  EXPECT_EQ(first_metric(m, {"absent", "process_resident_memory_bytes"}), 1.5e8);
  EXPECT_FALSE(first_metric(m, {"absent"}).has_value());
}

TEST(Prometheus, SamplesKeepTheirLabels) {
  const auto s = parse_prometheus_samples(
      "# TYPE tokenmill_step_phase_seconds counter\n"
      "tokenmill_step_phase_seconds{step=\"decode\",phase=\"compute\"} 1.25\n"
      "tokenmill_step_phase_seconds{ phase = \"communication\" , step=\"decode\", } 0.5\r\n"
      "odd{path=\"a\\\\b\",msg=\"say \\\"hi\\\"\\nbye\"} 2\n"
      "half{ok=\"1\",bad} 3\n"
      "unclosed{a=\"1\" 4\n");
  ASSERT_EQ(s.size(), 4u);
  EXPECT_EQ(s[0].name, "tokenmill_step_phase_seconds");
  EXPECT_EQ(s[0].labels.at("step"), "decode");
  EXPECT_EQ(s[0].labels.at("phase"), "compute");
  EXPECT_DOUBLE_EQ(s[0].value, 1.25);
  EXPECT_EQ(s[1].labels.at("phase"), "communication");  // spaces and a trailing comma are allowed
  EXPECT_DOUBLE_EQ(s[1].value, 0.5);
  EXPECT_EQ(s[2].labels.at("path"), "a\\b");
  EXPECT_EQ(s[2].labels.at("msg"), "say \"hi\"\nbye");
  EXPECT_EQ(s[3].labels.size(), 1u);  // labels up to the malformed pair
  EXPECT_DOUBLE_EQ(s[3].value, 3);
  EXPECT_EQ(sum_samples(s, "tokenmill_step_phase_seconds"), 1.75);
  EXPECT_EQ(sum_samples(s, "tokenmill_step_phase_seconds", {{"phase", "compute"}}), 1.25);
  EXPECT_EQ(sum_samples(s, "tokenmill_step_phase_seconds", {{"step", "prefill"}}), 0.0);  // family present
  EXPECT_FALSE(sum_samples(s, "absent").has_value());
}

// What tokenmill serve exports with two ranks, at the start and the end of
// a cell: ten decode steps and one prefill step ran in between.
constexpr const char* kMetricsBegin = R"(# HELP tokenmill_step_phase_seconds Engine step time by step kind and phase.
# TYPE tokenmill_step_phase_seconds counter
tokenmill_step_phase_seconds{step="prefill",phase="schedule"} 0.001
tokenmill_step_phase_seconds{step="prefill",phase="drafting"} 0
tokenmill_step_phase_seconds{step="prefill",phase="compute"} 0.5
tokenmill_step_phase_seconds{step="prefill",phase="communication"} 0.1
tokenmill_step_phase_seconds{step="prefill",phase="sampling"} 0.002
tokenmill_step_phase_seconds{step="decode",phase="schedule"} 0.01
tokenmill_step_phase_seconds{step="decode",phase="drafting"} 0
tokenmill_step_phase_seconds{step="decode",phase="compute"} 2
tokenmill_step_phase_seconds{step="decode",phase="communication"} 0.5
tokenmill_step_phase_seconds{step="decode",phase="sampling"} 0.02
# TYPE tokenmill_steps_total counter
tokenmill_steps_total{step="prefill"} 4
tokenmill_steps_total{step="decode"} 100
# TYPE tokenmill_comm_bytes_total counter
tokenmill_comm_bytes_total 1e6
# TYPE tokenmill_comm_syncs_total counter
tokenmill_comm_syncs_total 5000
# TYPE tokenmill_parallel_info gauge
tokenmill_parallel_info{tp="2",pp="1",ranks="2"} 1
# TYPE tokenmill_engine_step_seconds histogram
tokenmill_engine_step_seconds_sum 3.2
tokenmill_engine_step_seconds_count 104
tokenmill_prefix_cache_hit_tokens_total 10
tokenmill_prefix_cache_miss_tokens_total 90
)";

constexpr const char* kMetricsEnd = R"(tokenmill_step_phase_seconds{step="prefill",phase="schedule"} 0.002
tokenmill_step_phase_seconds{step="prefill",phase="drafting"} 0
tokenmill_step_phase_seconds{step="prefill",phase="compute"} 0.6
tokenmill_step_phase_seconds{step="prefill",phase="communication"} 0.12
tokenmill_step_phase_seconds{step="prefill",phase="sampling"} 0.003
tokenmill_step_phase_seconds{step="decode",phase="schedule"} 0.011
tokenmill_step_phase_seconds{step="decode",phase="drafting"} 0
tokenmill_step_phase_seconds{step="decode",phase="compute"} 2.2
tokenmill_step_phase_seconds{step="decode",phase="communication"} 0.6
tokenmill_step_phase_seconds{step="decode",phase="sampling"} 0.022
tokenmill_steps_total{step="prefill"} 5
tokenmill_steps_total{step="decode"} 110
tokenmill_comm_bytes_total 1.5e6
tokenmill_comm_syncs_total 5550
tokenmill_parallel_info{tp="2",pp="1",ranks="2"} 1
tokenmill_engine_step_seconds_sum 3.55
tokenmill_engine_step_seconds_count 115
tokenmill_prefix_cache_hit_tokens_total 40
tokenmill_prefix_cache_miss_tokens_total 160
)";

// A /metrics endpoint whose text the test swaps between scrapes.
class FakeMetricsServer {
 public:
  FakeMetricsServer() {
    server_.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
      std::lock_guard<std::mutex> lock(mutex_);
      res.set_content(text_, "text/plain; version=0.0.4");
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    // stop() before the accept loop runs would be lost; wait for it.
    while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~FakeMetricsServer() {
    server_.stop();
    thread_.join();
  }
  void set(const std::string& text) {
    std::lock_guard<std::mutex> lock(mutex_);
    text_ = text;
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

 private:
  httplib::Server server_;
  std::mutex mutex_;
  std::string text_;
  int port_ = 0;
  std::thread thread_;
};

ServerMetricNames tokenmill_names() {
  ServerMetricNames n;
  n.prefix_hit_tokens = {"tokenmill_prefix_cache_hit_tokens_total"};
  n.prefix_miss_tokens = {"tokenmill_prefix_cache_miss_tokens_total"};
  return n;
}

TEST(ServerMonitor, StepPhaseDeltasOverOneCell) {
  FakeMetricsServer fake;
  fake.set(kMetricsBegin);
  ServerMonitor monitor(fake.url(), tokenmill_names(), 0, 0);
  monitor.begin_cell();
  fake.set(kMetricsEnd);
  const ServerCellStats s = monitor.end_cell();
  EXPECT_TRUE(s.metrics_available);
  EXPECT_DOUBLE_EQ(s.prefix_hit_tokens, 30);
  EXPECT_DOUBLE_EQ(s.prefix_miss_tokens, 70);
  ASSERT_TRUE(s.step_phases.has_value());
  const StepPhaseCounters& d = *s.step_phases;
  EXPECT_DOUBLE_EQ(d.steps[0], 1);           // prefill
  EXPECT_DOUBLE_EQ(d.steps[1], 10);          // decode
  EXPECT_NEAR(d.seconds[1][2], 0.2, 1e-12);  // decode compute
  EXPECT_NEAR(d.seconds[1][kCommunicationPhase], 0.1, 1e-12);
  EXPECT_NEAR(d.seconds[0][kCommunicationPhase], 0.02, 1e-12);
  EXPECT_DOUBLE_EQ(d.comm_bytes, 5e5);
  EXPECT_DOUBLE_EQ(d.comm_syncs, 550);
  EXPECT_EQ(d.layout.at("tp"), "2");
  EXPECT_EQ(d.layout.at("ranks"), "2");
}

// A server that does not export the phases (vLLM, llama.cpp) leaves them
// unset, and a restart mid-cell (counters going backwards) drops them.
TEST(ServerMonitor, NoStepPhasesWithoutTheFamilyOrAfterARestart) {
  FakeMetricsServer fake;
  fake.set("vllm:num_requests_running 3\n");
  ServerMonitor monitor(fake.url(), tokenmill_names(), 0, 0);
  monitor.begin_cell();
  EXPECT_FALSE(monitor.end_cell().step_phases.has_value());
  fake.set(kMetricsEnd);
  monitor.begin_cell();
  fake.set(kMetricsBegin);
  EXPECT_FALSE(monitor.end_cell().step_phases.has_value());
}

TEST(ProcessMemory, ReadsOwnRss) {
  const auto m = read_process_memory(getpid());
  ASSERT_TRUE(m.has_value());
  EXPECT_GT(m->rss_bytes, 1e5);
  EXPECT_GE(m->hwm_bytes, m->rss_bytes);
  EXPECT_FALSE(read_process_memory(-5).has_value());
}

}  // namespace
}  // namespace tokenmill::bench
