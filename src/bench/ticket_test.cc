#include "bench/ticket.h"

#include <gtest/gtest.h>

#include <yaml-cpp/yaml.h>

#include "bench/report.h"
#include "util/error.h"

namespace tokenmill::bench {
namespace {

using nlohmann::json;

json cell(const std::string& key, double ttft, double p99, double success, double cents, double tok_s, int ok = 100) {
  return {{"key", key},
          {"requests", {{"ok", ok}}},
          {"latency_ms", {{"ttft", {{"p50", ttft}}}, {"tpot", {{"p50", 50.0}}}, {"e2e", {{"p99", p99}}}}},
          {"rates", {{"success_rate", success}}},
          {"cost", {{"per_success_cents", cents}}},
          {"throughput", {{"output_tok_per_s", tok_s}}}};
}

json report(const std::string& hash, json overall, json cells = json::array()) {
  return {{"format", "tokenmill-bench-report/1"},
          {"spec_hash", hash},
          {"traffic_shape", {{"rate", hash == "aaaa" ? 1.0 : 2.0}, {"concurrency", {8}}}},
          {"overall", std::move(overall)},
          {"cells", std::move(cells)}};
}

CompareInput compare_input(json before, json after, Gates gates = {}) {
  CompareInput in;
  in.before = std::move(before);
  in.after = std::move(after);
  in.gates = gates;
  in.change = "int8_weight_only";
  in.slice = "long_context_rag";
  return in;
}

Gates seed_gates() {  // the issue's gates: quality_regression 0, p99_budget_breach false
  Gates g;
  g.quality_regression = 0;
  g.p99_budget_breach = false;
  return g;
}

TEST(Ticket, TheIssueExampleHoldsOnTheSuccessRateDrop) {
  // before {ttft 820, p99 4100, success 0.86, 2.9 c}, after {690, 3320, 0.84, 2.1 c}.
  CompareInput in = compare_input(report("aaaa", cell("overall", 820, 4100, 0.86, 2.9, 10)),
                                  report("aaaa", cell("overall", 690, 3320, 0.84, 2.1, 10)), seed_gates());
  in.quality_before = Quality{"score", 0.70, true};
  in.quality_after = Quality{"score", 0.70, true};
  const Ticket t = decide(in);
  EXPECT_EQ(t.decision, "hold");
  EXPECT_NE(t.reason.find("success_rate"), std::string::npos) << t.reason;
  EXPECT_NE(t.reason.find("ttft_ms"), std::string::npos) << t.reason;  // listed as improved
  ASSERT_EQ(t.gates.size(), 2u);
  EXPECT_EQ(t.gates[0].status, "pass");  // quality equal
  EXPECT_EQ(t.gates[1].status, "pass");  // p99 fell
}

TEST(Ticket, ShipWhenGatesPassAndSomethingImproves) {
  CompareInput in = compare_input(report("aaaa", cell("overall", 820, 4100, 0.86, 2.9, 10)),
                                  report("aaaa", cell("overall", 690, 3320, 0.86, 2.1, 12)), seed_gates());
  in.quality_before = Quality{"perplexity", 10.0, false};
  in.quality_after = Quality{"perplexity", 10.0, false};
  const Ticket t = decide(in);
  EXPECT_EQ(t.decision, "ship") << t.reason;
  EXPECT_EQ(t.improved.size(), 4u);
  EXPECT_TRUE(t.regressed.empty());
}

TEST(Ticket, HoldWhenQualityIsNotMeasured) {
  const Ticket t = decide(compare_input(report("aaaa", cell("overall", 820, 4100, 0.86, 2.9, 10)),
                                        report("aaaa", cell("overall", 690, 3320, 0.86, 2.1, 12)), seed_gates()));
  EXPECT_EQ(t.decision, "hold");
  EXPECT_EQ(t.gates[0].status, "not_measured");
}

TEST(Ticket, RejectOnQualityRegressionOrP99Breach) {
  CompareInput q = compare_input(report("aaaa", cell("overall", 820, 4100, 0.86, 2.9, 10)),
                                 report("aaaa", cell("overall", 690, 3320, 0.86, 2.1, 12)), seed_gates());
  q.quality_before = Quality{"score", 0.70, true};
  q.quality_after = Quality{"score", 0.69, true};
  EXPECT_EQ(decide(q).decision, "reject");
  q.gates.quality_regression = 0.02;  // a 1.4% drop is within 2%
  EXPECT_EQ(decide(q).decision, "ship");

  // p99 3320 -> 4400 breaches before's p99 + 5% (4305) even though TTFT improved.
  CompareInput p = compare_input(report("aaaa", cell("overall", 820, 4100, 0.86, 2.9, 10)),
                                 report("aaaa", cell("overall", 600, 4400, 0.86, 2.9, 10)), seed_gates());
  p.gates.quality_regression = -1;  // no quality gate
  Ticket t = decide(p);
  EXPECT_EQ(t.decision, "reject");
  EXPECT_NE(t.reason.find("p99_budget"), std::string::npos);
  p.gates.p99_budget_ms = 5000;  // an absolute budget it meets
  t = decide(p);
  EXPECT_NE(t.decision, "reject");
}

TEST(Ticket, SliceBreachRejectsOnlyWithEnoughRequests) {
  const json before = report("aaaa", cell("overall", 800, 4000, 0.9, 3, 10),
                             json::array({cell("c8_h0_b2", 2000, 9000, 0.9, 5, 2, 30)}));
  const json after_many = report("aaaa", cell("overall", 600, 3000, 0.9, 2, 12),
                                 json::array({cell("c8_h0_b2", 1500, 12000, 0.9, 4, 3, 30)}));
  const json after_few = report("aaaa", cell("overall", 600, 3000, 0.9, 2, 12),
                                json::array({cell("c8_h0_b2", 1500, 12000, 0.9, 4, 3, 5)}));
  Gates g;
  g.p99_budget_breach = false;
  const Ticket many = decide(compare_input(before, after_many, g));
  EXPECT_EQ(many.decision, "reject");
  EXPECT_NE(many.reason.find("c8_h0_b2"), std::string::npos);
  EXPECT_EQ(decide(compare_input(before, after_few, g)).decision, "ship");
  EXPECT_TRUE(many.slices.contains("c8_h0_b2"));
  EXPECT_NEAR(many.slices["c8_h0_b2"]["p99_ms"]["change"].get<double>(), 12000.0 / 9000 - 1, 1e-12);
}

// A floor on speculative decoding's acceptance in the after run: fails
// below it, passes above, and is not measured when the report has none;
// the communication share's cap works the other way round.
TEST(Ticket, ShareGates) {
  Gates g;
  g.min_spec_acceptance_rate = 0.5;
  json after = cell("overall", 690, 3320, 0.86, 2.1, 12);
  const json before = report("aaaa", cell("overall", 820, 4100, 0.86, 2.9, 10));
  const Ticket unmeasured = decide(compare_input(before, report("aaaa", after), g));
  ASSERT_EQ(unmeasured.gates.size(), 1u);
  EXPECT_EQ(unmeasured.gates[0].name, "spec_acceptance_rate");
  EXPECT_EQ(unmeasured.gates[0].status, "not_measured");
  after["speculative"] = {{"acceptance_rate", 0.3}};
  const Ticket low = decide(compare_input(before, report("aaaa", after), g));
  EXPECT_EQ(low.gates[0].status, "fail");
  EXPECT_EQ(low.decision, "reject");
  after["speculative"]["acceptance_rate"] = 0.7;
  const Ticket high = decide(compare_input(before, report("aaaa", after), g));
  EXPECT_EQ(high.gates[0].status, "pass");
  EXPECT_EQ(high.decision, "ship") << high.reason;
  // The communication share is a cap: above it fails.
  Gates cap;
  cap.max_communication_share = 0.3;
  after["server"] = {{"communication_share", 0.4}};
  const Ticket over = decide(compare_input(before, report("aaaa", after), cap));
  ASSERT_EQ(over.gates.size(), 1u);
  EXPECT_EQ(over.gates[0].name, "communication_share");
  EXPECT_EQ(over.gates[0].status, "fail");
  EXPECT_EQ(over.gates[0].detail, "40.0% (cap 30.0%)");
  after["server"]["communication_share"] = 0.2;
  EXPECT_EQ(decide(compare_input(before, report("aaaa", after), cap)).gates[0].status, "pass");
}

// The gate reads what report.cc writes: a bench serve report built from
// ServerCellStats whose step phases give a decode step 14 ms compute + the
// given communication (< 0: a server without the phase metric), with the
// cap taken from the spec's gates.
json served_report(double communication_s_per_step) {
  const TrafficSpec spec = parse_traffic_spec(
      "inference_benchmark: tp\ntraffic: {concurrency: [1]}\nprompts: {token_counter: words}\n"
      "gates: {max_communication_share: 0.3}",
      "tp.yaml");
  RunPlan plan;
  plan.cells.push_back(CellPlan{1, 0.0, {}});
  RunResult run;
  CellRun cr;
  RequestRecord r;
  r.status = RequestStatus::kOk;
  r.send_ms = 0;
  r.chunk_ms = {100, 120};
  r.first_token_ms = 100;
  r.end_ms = 120;
  r.planned_input_tokens = r.prompt_tokens = 64;
  r.output_tokens = 2;
  cr.records.push_back(r);
  cr.window_end_ms = 200;
  run.cells.push_back(cr);
  ServerCellStats server;
  if (communication_s_per_step >= 0) {
    server.step_phases = StepPhaseCounters{};
    server.step_phases->steps[1] = 10;
    server.step_phases->seconds[1][2] = 10 * 0.014;
    server.step_phases->seconds[1][kCommunicationPhase] = 10 * communication_s_per_step;
  }
  run.server.push_back(server);
  return build_report(spec, plan, run);
}

TEST(Ticket, CommunicationGateOnAServedReport) {
  const json before = served_report(0);  // one process: no communication
  const Gates gates = gates_from_report(before);
  EXPECT_DOUBLE_EQ(gates.max_communication_share, 0.3);
  const Ticket within = decide(compare_input(before, served_report(0.005), gates));  // 5 / 19 ms = 26.3%
  ASSERT_EQ(within.gates.size(), 1u);
  EXPECT_EQ(within.gates[0].status, "pass") << within.gates[0].detail;
  EXPECT_EQ(within.gates[0].detail, "26.3% (cap 30.0%)");
  const Ticket reject = decide(compare_input(before, served_report(0.0093), gates));  // 9.3 / 23.3 ms = 39.9%
  EXPECT_EQ(reject.gates[0].status, "fail");
  EXPECT_EQ(reject.gates[0].detail, "39.9% (cap 30.0%)");
  EXPECT_EQ(reject.decision, "reject");
  const Ticket unmeasured = decide(compare_input(before, served_report(-1), gates));
  EXPECT_EQ(unmeasured.gates[0].status, "not_measured");
  EXPECT_EQ(unmeasured.decision, "hold");
}

TEST(Ticket, HoldWhenNothingImproves) {
  const Ticket t = decide(compare_input(report("aaaa", cell("overall", 820, 4100, 0.86, 2.9, 10)),
                                        report("aaaa", cell("overall", 810, 4080, 0.86, 2.85, 10.2))));
  EXPECT_EQ(t.decision, "hold");
  EXPECT_TRUE(t.improved.empty());
}

TEST(Ticket, RefusesDifferentShapesAndNonReports) {
  try {
    decide(
        compare_input(report("aaaa", cell("overall", 1, 1, 1, 1, 1)), report("bbbb", cell("overall", 1, 1, 1, 1, 1))));
    ADD_FAILURE() << "compared different shapes";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rate"), std::string::npos) << e.what();  // names the differing key
  }
  EXPECT_THROW(decide(compare_input(json{{"x", 1}}, report("aaaa", cell("overall", 1, 1, 1, 1, 1)))), Error);
}

TEST(Ticket, YamlHasTheDesignShape) {
  CompareInput in = compare_input(report("aaaa", cell("overall", 820, 4100, 0.86, 2.9, 10)),
                                  report("aaaa", cell("overall", 690, 3320, 0.84, 2.1, 10)), seed_gates());
  const YAML::Node y = YAML::Load(ticket_yaml(decide(in)));
  const YAML::Node t = y["optimization_ticket"];
  ASSERT_TRUE(t.IsMap());
  EXPECT_EQ(t["change"].as<std::string>(), "int8_weight_only");
  EXPECT_EQ(t["slice"].as<std::string>(), "long_context_rag");
  EXPECT_DOUBLE_EQ(t["before"]["ttft_ms"].as<double>(), 820);
  EXPECT_DOUBLE_EQ(t["after"]["p99_ms"].as<double>(), 3320);
  EXPECT_DOUBLE_EQ(t["after"]["success_rate"].as<double>(), 0.84);
  EXPECT_DOUBLE_EQ(t["before"]["cost_cents"].as<double>(), 2.9);
  EXPECT_EQ(t["decision"].as<std::string>(), "hold");
  EXPECT_FALSE(t["reason"].as<std::string>().empty());
  EXPECT_FALSE(t["next"].as<std::string>().empty());
  EXPECT_TRUE(t["gates"].IsSequence());
  EXPECT_TRUE(t["slices"]["overall"].IsMap());
}

TEST(Quality, ParsesTheThreeShapes) {
  EXPECT_TRUE(parse_quality(json{{"score", 0.5}}, "q").higher_is_better);
  EXPECT_FALSE(parse_quality(json{{"perplexity", 8.1}}, "q").higher_is_better);
  EXPECT_EQ(parse_quality(json{{"accuracy", 0.9}}, "q").metric, "accuracy");
  EXPECT_THROW(parse_quality(json{{"bleu", 1}}, "q"), Error);
}

}  // namespace
}  // namespace tokenmill::bench
