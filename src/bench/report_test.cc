#include "bench/report.h"

#include <gtest/gtest.h>

namespace tokenmill::bench {
namespace {

RequestRecord rec(RequestStatus status, int32_t bucket, double send, std::vector<double> chunks, double end,
                  int64_t prompt, int64_t planned) {
  RequestRecord r;
  r.status = status;
  r.input_bucket = bucket;
  r.send_ms = send;
  r.chunk_ms = std::move(chunks);
  if (!r.chunk_ms.empty()) r.first_token_ms = r.chunk_ms.front();
  r.end_ms = end;
  r.prompt_tokens = prompt;
  r.planned_input_tokens = planned;
  r.output_tokens = static_cast<int64_t>(r.chunk_ms.size());
  return r;
}

class ReportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    spec_ = parse_traffic_spec(
        "inference_benchmark: unit\ntraffic: {concurrency: [2], length_buckets: [[1, 100], [101, 400]]}\n"
        "cost: {usd_per_hour: 36}\nslo: {ttft_ms: 200}\nreport: [ttft_ms, p99_ms, output_tok_per_s, cost_per_success]\n"
        "prompts: {token_counter: words}",
        "unit.yaml");
    plan_.cells.push_back(CellPlan{2, 0.0, {}});
    CellRun cr;
    RequestRecord r0 = rec(RequestStatus::kOk, 0, 0, {100, 110, 120, 130}, 135, 50, 50);
    r0.server_queue_ms = 20;
    r0.cached_tokens = 10;
    cr.records.push_back(r0);
    cr.records.push_back(rec(RequestStatus::kOk, 1, 500, {900, 950, 1000}, 1000, 150, 150));
    cr.records.push_back(rec(RequestStatus::kCancelled, 0, 1000, {1100, 1120}, 1125, -1, 60));
    RequestRecord r3 = rec(RequestStatus::kRejected, 1, 1500, {}, 2000, -1, 300);
    r3.http_status = 429;
    cr.records.push_back(r3);
    cr.window_start_ms = 0;
    cr.window_end_ms = 2000;
    run_.cells.push_back(cr);
    run_.server.push_back(ServerCellStats{});
    run_.url = "http://x:1";
    run_.started_at = "now";
  }
  TrafficSpec spec_;
  RunPlan plan_;
  RunResult run_;
};

TEST_F(ReportTest, CellNumbersByHand) {
  const nlohmann::json r = build_report(spec_, plan_, run_);
  ASSERT_EQ(r["cells"].size(), 3u);  // all + two buckets
  const nlohmann::json& c = r["cells"][0];
  EXPECT_EQ(c["key"], "c2_h0_all");
  EXPECT_EQ(c["requests"]["sent"], 4);
  EXPECT_EQ(c["requests"]["ok"], 2);
  EXPECT_DOUBLE_EQ(c["rates"]["success_rate"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(c["rates"]["rejection_rate"].get<double>(), 0.25);
  EXPECT_DOUBLE_EQ(c["rates"]["cancel_rate"].get<double>(), 0.25);
  const nlohmann::json& t = c["throughput"];
  EXPECT_DOUBLE_EQ(t["window_s"].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(t["req_per_s"].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(t["input_tok_per_s"].get<double>(), 100.0);  // (50 + 150) / 2
  EXPECT_DOUBLE_EQ(t["output_tok_per_s"].get<double>(), 4.5);   // (4 + 3 + 2) / 2
  EXPECT_DOUBLE_EQ(t["total_tok_per_s"].get<double>(), 104.5);
  const nlohmann::json& l = c["latency_ms"];
  EXPECT_EQ(l["ttft"]["count"], 3);  // the cancelled one saw a first token
  EXPECT_DOUBLE_EQ(l["ttft"]["p50"].get<double>(), 100);
  EXPECT_DOUBLE_EQ(l["ttft"]["mean"].get<double>(), 200);
  EXPECT_DOUBLE_EQ(l["tpot"]["min"].get<double>(), 10);  // (130 - 100) / 3
  EXPECT_DOUBLE_EQ(l["tpot"]["max"].get<double>(), 50);  // (1000 - 900) / 2
  EXPECT_DOUBLE_EQ(l["itl"]["p50"].get<double>(), 15);   // 10 10 10 20 50 50
  EXPECT_DOUBLE_EQ(l["e2e"]["max"].get<double>(), 500);
  EXPECT_EQ(l["queue"]["count"], 1);
  EXPECT_DOUBLE_EQ(c["goodput"]["req_per_s"].get<double>(), 0.5);  // only r0 meets TTFT <= 200
  EXPECT_DOUBLE_EQ(c["cost"]["usd"].get<double>(), 0.02);
  EXPECT_DOUBLE_EQ(c["cost"]["per_success_usd"].get<double>(), 0.01);
  EXPECT_NEAR(c["cost"]["per_million_output_tokens_usd"].get<double>(), 0.02 / 9 * 1e6, 1e-6);
  EXPECT_EQ(c["bottleneck"], "failures");                                     // 25% rejected
  EXPECT_DOUBLE_EQ(c["server"]["prefix_cache_hit_rate"].get<double>(), 0.2);  // 10 / 50 from responses
  EXPECT_EQ(c["server"]["prefix_cache_hit_rate_source"], "responses");
  // Buckets: bucket 0 holds r0 and r2; its cost share is its tokens (54 + 62) of 269.
  const nlohmann::json& b0 = r["cells"][1];
  EXPECT_EQ(b0["key"], "c2_h0_b0");
  EXPECT_EQ(b0["requests"]["sent"], 2);
  EXPECT_NEAR(b0["cost"]["usd"].get<double>(), 0.02 * 116 / 269, 1e-12);
  EXPECT_DOUBLE_EQ(b0["throughput"]["output_tok_per_s"].get<double>(), 3.0);  // (4 + 2) / 2 s
  EXPECT_DOUBLE_EQ(r["headline"]["ttft_ms"].get<double>(), 100);
  EXPECT_DOUBLE_EQ(r["headline"]["cost_per_success"].get<double>(), 0.01);
}

// Acceptance rate = accepted / drafted; accepted per decode step = accepted
// / (output - 1 - accepted) summed over ok requests; null when no response
// reported drafts.
TEST_F(ReportTest, SpeculativeDecodingFromResponses) {
  EXPECT_TRUE(build_report(spec_, plan_, run_)["cells"][0]["speculative"].is_null());
  RequestRecord& r0 = run_.cells[0].records[0];  // 4 output tokens
  RequestRecord& r1 = run_.cells[0].records[1];  // 3 output tokens
  r0.draft_tokens = 6;
  r0.accepted_draft_tokens = 2;  // 4 - 1 - 2 = 1 decode step
  r1.draft_tokens = 2;
  r1.accepted_draft_tokens = 0;  // 2 decode steps
  spec_.report_metrics.push_back("spec_acceptance_rate");
  const nlohmann::json r = build_report(spec_, plan_, run_);
  const nlohmann::json& s = r["cells"][0]["speculative"];
  EXPECT_DOUBLE_EQ(s["draft_tokens"].get<double>(), 8);
  EXPECT_DOUBLE_EQ(s["accepted_draft_tokens"].get<double>(), 2);
  EXPECT_DOUBLE_EQ(s["acceptance_rate"].get<double>(), 0.25);
  EXPECT_DOUBLE_EQ(s["accepted_per_decode_step"].get<double>(), 2.0 / 3.0);
  EXPECT_DOUBLE_EQ(r["headline"]["spec_acceptance_rate"].get<double>(), 0.25);
  EXPECT_DOUBLE_EQ(r["cells"][2]["speculative"]["acceptance_rate"].get<double>(), 0.0);  // bucket 1: r1
  const std::string md = report_markdown(r);
  EXPECT_NE(md.find("| acceptance rate |"), std::string::npos);
  EXPECT_NE(md.find("25.0%"), std::string::npos);
}

TEST_F(ReportTest, ServerCountersWinOverResponses) {
  run_.server[0].prefix_hit_tokens = 30;
  run_.server[0].prefix_miss_tokens = 70;
  run_.server[0].memory_high_water_bytes = 1 << 20;
  run_.server[0].memory_source = "proc:1";
  const nlohmann::json r = build_report(spec_, plan_, run_);
  EXPECT_DOUBLE_EQ(r["cells"][0]["server"]["prefix_cache_hit_rate"].get<double>(), 0.3);
  EXPECT_EQ(r["cells"][0]["server"]["prefix_cache_hit_rate_source"], "metrics");
  EXPECT_DOUBLE_EQ(r["overall"]["server"]["memory_high_water_bytes"].get<double>(), 1 << 20);
}

// tokenmill's step phases: decode steps of 16 ms compute + 4 ms
// communication on two ranks (tp2).
StepPhaseCounters tp2_phases(double decode_steps) {
  StepPhaseCounters c;
  c.steps[1] = decode_steps;
  c.seconds[1][2] = 0.016 * decode_steps;                    // compute
  c.seconds[1][kCommunicationPhase] = 0.004 * decode_steps;  // communication
  c.comm_bytes = 1e5 * decode_steps;
  c.comm_syncs = 48 * decode_steps;
  c.layout = {{"tp", "2"}, {"pp", "1"}, {"ranks", "2"}};
  return c;
}

TEST_F(ReportTest, CommunicationShareFromStepPhases) {
  nlohmann::json r = build_report(spec_, plan_, run_);
  EXPECT_TRUE(r["cells"][0]["server"]["communication_share"].is_null());  // not exported: null
  EXPECT_TRUE(r["cells"][0]["server"]["parallel"].is_null());
  EXPECT_TRUE(r["overall"]["server"]["communication_share"].is_null());
  EXPECT_EQ(report_markdown(r).find("## Parallel phases"), std::string::npos);

  run_.server[0].step_phases = tp2_phases(50);
  plan_.cells.push_back(plan_.cells[0]);  // a second cell, like the first
  run_.cells.push_back(run_.cells[0]);
  run_.server.push_back(run_.server[0]);
  run_.server[1].step_phases = tp2_phases(150);
  spec_.report_metrics.push_back("communication_share");
  r = build_report(spec_, plan_, run_);
  const nlohmann::json& s = r["cells"][0]["server"];
  EXPECT_NEAR(s["communication_share"].get<double>(), 0.2, 1e-12);
  const nlohmann::json& p = s["parallel"];
  EXPECT_EQ(p["layout"]["tp"], 2);
  EXPECT_TRUE(p["prefill"].is_null());
  EXPECT_DOUBLE_EQ(p["decode"]["steps"].get<double>(), 50);
  EXPECT_NEAR(p["decode"]["compute_ms"].get<double>(), 16, 1e-9);
  EXPECT_NEAR(p["decode"]["communication_ms"].get<double>(), 4, 1e-9);
  EXPECT_NEAR(p["all"]["syncs_per_step"].get<double>(), 48, 1e-9);
  EXPECT_NEAR(p["all"]["link_gbps"].get<double>(), 1e5 * 8 / 0.004 / 1e9, 1e-9);  // 0.2 Gb/s
  EXPECT_TRUE(r["cells"][1]["server"]["parallel"].is_null());  // buckets: counters cover whole cells only
  const nlohmann::json& o = r["overall"]["server"];
  EXPECT_NEAR(o["communication_share"].get<double>(), 0.2, 1e-12);
  EXPECT_DOUBLE_EQ(o["parallel"]["decode"]["steps"].get<double>(), 200);  // 50 + 150
  EXPECT_NEAR(r["headline"]["communication_share"].get<double>(), 0.2, 1e-12);
  const std::string md = report_markdown(r);
  EXPECT_NE(md.find("## Parallel phases"), std::string::npos) << md;
  EXPECT_NE(md.find("| **overall** | 2ranks_tp2 | 200 | decode | 0.0 | 0.0 | 16.0 | 4.0 | 0.0 | 20.0% |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| communication_share | 20.0% |"), std::string::npos) << md;

  run_.server[1].step_phases.reset();  // one cell without phases: no run-wide figure
  r = build_report(spec_, plan_, run_);
  EXPECT_TRUE(r["overall"]["server"]["communication_share"].is_null());
  EXPECT_NEAR(r["cells"][0]["server"]["communication_share"].get<double>(), 0.2, 1e-12);
}

TEST_F(ReportTest, StageSplitNamesTheDominantStage) {
  std::vector<const RequestRecord*> ok = {&run_.cells[0].records[0], &run_.cells[0].records[1]};
  const StageSplit s = stage_split(ok);
  EXPECT_DOUBLE_EQ(s.server_queue_ms, 10);  // (20 + 0) / 2
  EXPECT_DOUBLE_EQ(s.prefill_ms, 240);      // (80 + 400) / 2
  EXPECT_DOUBLE_EQ(s.decode_ms, 67.5);      // (35 + 100) / 2
  EXPECT_EQ(s.bottleneck, "prefill");
  // r1 alone reports no queue time: its wait would hide inside TTFT.
  EXPECT_EQ(stage_split({&run_.cells[0].records[1]}).bottleneck, "prefill + server queue (not reported)");
}

TEST_F(ReportTest, MarkdownShowsTheBottleneckAndTables) {
  const std::string md = report_markdown(build_report(spec_, plan_, run_));
  EXPECT_NE(md.find("**Bottleneck overall: failures.**"), std::string::npos) << md;
  EXPECT_NE(md.find("## Where the time goes"), std::string::npos);
  EXPECT_NE(md.find("| c=2 h=0 in 1-100 |"), std::string::npos);
  EXPECT_NE(md.find("| ttft_ms | 100 ms |"), std::string::npos) << md;
}

}  // namespace
}  // namespace tokenmill::bench
