#include "bench/server_monitor.h"

#include <gtest/gtest.h>

#include <unistd.h>

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

TEST(ProcessMemory, ReadsOwnRss) {
  const auto m = read_process_memory(getpid());
  ASSERT_TRUE(m.has_value());
  EXPECT_GT(m->rss_bytes, 1e5);
  EXPECT_GE(m->hwm_bytes, m->rss_bytes);
  EXPECT_FALSE(read_process_memory(-5).has_value());
}

}  // namespace
}  // namespace tokenmill::bench
