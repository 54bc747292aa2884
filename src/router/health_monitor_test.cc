#include "router/health_monitor.h"

#include <gtest/gtest.h>

namespace tokenmill::router {
namespace {

TEST(HealthMonitor, Verdicts) {
  EXPECT_TRUE(health_says_up(200, R"({"status":"ok"})"));
  EXPECT_TRUE(health_says_up(503, R"({"status":"overloaded","waiting":9})"));
  EXPECT_FALSE(health_says_up(503, R"({"status":"loading"})"));
  EXPECT_FALSE(health_says_up(503, R"({"status":"stopping"})"));
  EXPECT_FALSE(health_says_up(503, "not json"));
  EXPECT_FALSE(health_says_up(500, ""));
  EXPECT_FALSE(health_says_up(-1, ""));
}

TEST(HealthMonitor, MetricValue) {
  const std::string text =
      "# HELP tokenmill_requests_waiting Sequences waiting for admission.\n"
      "# TYPE tokenmill_requests_waiting gauge\n"
      "tokenmill_requests_waiting_total 99\n"
      "tokenmill_requests_waiting{x=\"1\"} 98\n"
      "tokenmill_requests_waiting 3\n"
      "tokenmill_other 1.5e3 1700000000\n"
      "tokenmill_bad abc\n";
  EXPECT_EQ(metric_value(text, "tokenmill_requests_waiting"), 3.0);
  EXPECT_EQ(metric_value(text, "tokenmill_other"), 1500.0);
  EXPECT_EQ(metric_value(text, "tokenmill_bad"), std::nullopt);
  EXPECT_EQ(metric_value(text, "tokenmill_missing"), std::nullopt);
  EXPECT_EQ(metric_value("", "x"), std::nullopt);
}

}  // namespace
}  // namespace tokenmill::router
