#include "bench/capacity_report.h"

#include <gtest/gtest.h>

namespace tokenmill::bench {
namespace {

using nlohmann::json;

json capacity(json hi, json lo, bool converged, const std::string& stop, const std::string& variable = "rate") {
  return {
      {"load_variable", variable},
      {"arrival", "poisson"},
      {"criteria", {{"slo_ms", {{"ttft", 500}, {"tpot", 33}, {"e2e", 0}}}, {"percentile", 99}, {"min_goodput", 0.9}}},
      {"capacity", hi},
      {"first_failing", lo},
      {"converged", converged},
      {"stop_reason", stop}};
}

TEST(CapacityReport, StatementSaysWhatTheSearchFound) {
  EXPECT_EQ(capacity_statement(capacity(2.5, 2.75, true, "converged")),
            "This server serves 2.5 req/s of this traffic within SLO (TTFT p99 <= 500 ms, TPOT p99 <= 33 ms, "
            "goodput >= 90 %); 2.75 req/s fails.");
  EXPECT_EQ(capacity_statement(capacity(4, 5, true, "converged", "concurrency")),
            "This server serves 4 concurrent clients of this traffic within SLO (TTFT p99 <= 500 ms, TPOT p99 <= "
            "33 ms, goodput >= 90 %); 5 concurrent clients fails.");
  EXPECT_EQ(capacity_statement(capacity(nullptr, 0.001, false, "even the lowest load allowed fails")),
            "This server does not serve this traffic within SLO (TTFT p99 <= 500 ms, TPOT p99 <= 33 ms, goodput >= "
            "90 %) at any load tried (lowest: 0.001 req/s).");
  const std::string more = capacity_statement(capacity(64, nullptr, false, "step limit reached"));
  EXPECT_NE(more.find("serves 64 req/s"), std::string::npos) << more;
  EXPECT_NE(more.find("every load tried met (step limit reached), so it may serve more."), std::string::npos) << more;
  const std::string loose = capacity_statement(capacity(4, 8, false, "step limit reached before the precision"));
  EXPECT_NE(loose.find("8 req/s fails (step limit reached before the precision)."), std::string::npos) << loose;
}

}  // namespace
}  // namespace tokenmill::bench
