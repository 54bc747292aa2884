#include "console/console_ticket.h"

#include <gtest/gtest.h>

#include "server/api_error.h"

namespace tokenmill::console {
namespace {

using nlohmann::json;

json overall(double ttft, double e2e_p99, double tok_s) {
  return {{"key", "overall"},
          {"requests", {{"ok", 100}}},
          {"latency_ms", {{"ttft", {{"p50", ttft}}}, {"tpot", {{"p50", 20.0}}}, {"e2e", {{"p99", e2e_p99}}}}},
          {"rates", {{"success_rate", 1.0}}},
          {"cost", {{"per_success_cents", 0.01}}},
          {"throughput", {{"output_tok_per_s", tok_s}}}};
}

json report(const std::string& hash, json whole) {
  return {{"format", "tokenmill-bench-report/1"},
          {"spec_hash", hash},
          {"traffic_shape", {{"concurrency", {4}}}},
          {"overall", std::move(whole)},
          {"cells", json::array()}};
}

int status_of(const json& body, std::string* message = nullptr) {
  try {
    ticket_response(body);
  } catch (const server::ApiError& e) {
    if (message) *message = e.what();
    return e.status();
  }
  return 200;
}

TEST(ConsoleTicket, FasterRunShipsAsBenchCompareDecides) {
  json before = report("h1", overall(100, 900, 50));
  before["gates"] = {{"p99_budget_ms", 1000.0}, {"p99_budget_breach", false}};  // the spec's gates travel with it
  const json t = ticket_response(
      {{"before", before}, {"after", report("h1", overall(70, 800, 60))}, {"change", "--kv-dtype q8_0"}});
  EXPECT_EQ(t["decision"], "ship") << t.dump(2);
  EXPECT_EQ(t["change"], "--kv-dtype q8_0");
  EXPECT_DOUBLE_EQ(t["before"]["ttft_ms"].get<double>(), 100);
  EXPECT_DOUBLE_EQ(t["after"]["ttft_ms"].get<double>(), 70);
  EXPECT_NE(t["yaml"].get<std::string>().find("optimization_ticket:"), std::string::npos);
  EXPECT_NE(t["yaml"].get<std::string>().find("ship"), std::string::npos);
  ASSERT_FALSE(t["gates"].empty()) << t.dump(2);
  for (const json& g : t["gates"]) EXPECT_EQ(g["status"], "pass") << g.dump();
}

TEST(ConsoleTicket, SlowerRunIsHeldWithItsReason) {
  const json t = ticket_response(
      {{"before", report("h1", overall(100, 900, 50))}, {"after", report("h1", overall(160, 900, 50))}});
  EXPECT_EQ(t["decision"], "hold");
  EXPECT_NE(t["reason"].get<std::string>().find("ttft_ms"), std::string::npos) << t["reason"];
}

TEST(ConsoleTicket, DifferentTrafficShapesAreRefusedWithTheReason) {
  std::string message;
  EXPECT_EQ(status_of({{"before", report("h1", overall(100, 900, 50))}, {"after", report("h2", overall(70, 800, 60))}},
                      &message),
            400);
  EXPECT_NE(message.find("traffic"), std::string::npos) << message;
}

TEST(ConsoleTicket, BadBodiesSayWhatIsMissing) {
  std::string message;
  EXPECT_EQ(status_of(json::array(), &message), 400);
  EXPECT_EQ(status_of({{"before", report("h1", overall(1, 1, 1))}}, &message), 400);
  EXPECT_NE(message.find("'after'"), std::string::npos) << message;
  EXPECT_EQ(status_of({{"before", json{{"a", 1}}}, {"after", report("h1", overall(1, 1, 1))}}, &message), 400);
  EXPECT_NE(message.find("not a `tokenmill bench serve` report"), std::string::npos) << message;
  EXPECT_EQ(
      status_of({{"before", report("h1", overall(1, 1, 1))}, {"after", report("h1", overall(1, 1, 1))}, {"change", 5}},
                &message),
      400);
  EXPECT_NE(message.find("'change'"), std::string::npos) << message;
}

}  // namespace
}  // namespace tokenmill::console
