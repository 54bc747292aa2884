#include "bench/step_phases.h"

#include <gtest/gtest.h>

#include <cmath>

namespace tokenmill::bench {
namespace {

using nlohmann::json;

constexpr size_t kPrefill = 0, kDecode = 1;
constexpr size_t kSchedule = 0, kDrafting = 1, kCompute = 2, kSampling = 4;

// Two ranks, tp2: a decode step of 20 ms compute + 5 ms communication.
StepPhaseCounters tp2_cell() {
  StepPhaseCounters c;
  c.steps[kPrefill] = 2;
  c.seconds[kPrefill][kSchedule] = 0.002;
  c.seconds[kPrefill][kCompute] = 0.3;
  c.seconds[kPrefill][kCommunicationPhase] = 0.1;
  c.seconds[kPrefill][kSampling] = 0.002;
  c.steps[kDecode] = 100;
  c.seconds[kDecode][kSchedule] = 0.1;
  c.seconds[kDecode][kDrafting] = 0.0;
  c.seconds[kDecode][kCompute] = 2.0;
  c.seconds[kDecode][kCommunicationPhase] = 0.5;
  c.seconds[kDecode][kSampling] = 0.4;
  c.comm_bytes = 51e6;
  c.comm_syncs = 5100;
  c.layout = {{"tp", "2"}, {"pp", "1"}, {"ranks", "2"}};
  return c;
}

TEST(StepPhases, ReadsTheFamilyFromSamples) {
  const auto samples = parse_prometheus_samples(
      "tokenmill_step_phase_seconds{step=\"decode\",phase=\"compute\"} 2\n"
      "tokenmill_step_phase_seconds{step=\"decode\",phase=\"communication\"} 0.5\n"
      "tokenmill_step_phase_seconds{step=\"prefill\",phase=\"compute\"} 0.25\n"
      "tokenmill_steps_total{step=\"decode\"} 100\n"
      "tokenmill_parallel_info{tp=\"1\",pp=\"1\",ranks=\"1\"} 1\n");
  const auto c = read_step_phases(samples);
  ASSERT_TRUE(c.has_value());
  EXPECT_DOUBLE_EQ(c->seconds[kDecode][kCompute], 2);
  EXPECT_DOUBLE_EQ(c->seconds[kDecode][kCommunicationPhase], 0.5);
  EXPECT_DOUBLE_EQ(c->seconds[kPrefill][kCompute], 0.25);
  EXPECT_DOUBLE_EQ(c->seconds[kPrefill][kSampling], 0);  // series not exported yet
  EXPECT_DOUBLE_EQ(c->steps[kDecode], 100);
  EXPECT_DOUBLE_EQ(c->steps[kPrefill], 0);
  EXPECT_EQ(c->comm_bytes, -1);  // not exported
  EXPECT_EQ(c->layout.at("ranks"), "1");
  EXPECT_FALSE(read_step_phases(parse_prometheus_samples("tokenmill_steps_total{step=\"decode\"} 3\n")));
}

TEST(StepPhases, DeltaCountsFromZeroAndRefusesResets) {
  const StepPhaseCounters end = tp2_cell();
  const auto from_zero = step_phase_delta(std::nullopt, end);
  ASSERT_TRUE(from_zero.has_value());
  EXPECT_DOUBLE_EQ(from_zero->steps[kDecode], 100);
  EXPECT_DOUBLE_EQ(from_zero->comm_bytes, 51e6);
  StepPhaseCounters begin = end;
  begin.steps[kDecode] = 40;
  begin.seconds[kDecode][kCompute] = 0.5;
  begin.comm_bytes = -1;  // appeared during the cell
  begin.comm_syncs = 100;
  const auto d = step_phase_delta(begin, end);
  ASSERT_TRUE(d.has_value());
  EXPECT_DOUBLE_EQ(d->steps[kDecode], 60);
  EXPECT_DOUBLE_EQ(d->seconds[kDecode][kCompute], 1.5);
  EXPECT_DOUBLE_EQ(d->seconds[kDecode][kSampling], 0);
  EXPECT_DOUBLE_EQ(d->comm_bytes, 51e6);
  EXPECT_DOUBLE_EQ(d->comm_syncs, 5000);
  EXPECT_EQ(d->layout, end.layout);
  begin.comm_syncs = 6000;  // restarted
  EXPECT_FALSE(step_phase_delta(begin, end).has_value());
  EXPECT_FALSE(step_phase_delta(end, StepPhaseCounters{}).has_value());
}

TEST(StepPhases, ParallelJsonByHand) {
  const json j = parallel_json(tp2_cell());
  EXPECT_EQ(j["layout"], (json{{"tp", 2}, {"pp", 1}, {"ranks", 2}}));
  const json& dec = j["decode"];
  EXPECT_DOUBLE_EQ(dec["steps"].get<double>(), 100);
  EXPECT_DOUBLE_EQ(dec["compute_ms"].get<double>(), 20);
  EXPECT_DOUBLE_EQ(dec["communication_ms"].get<double>(), 5);
  EXPECT_DOUBLE_EQ(dec["schedule_ms"].get<double>(), 1);
  EXPECT_DOUBLE_EQ(dec["sampling_ms"].get<double>(), 4);
  EXPECT_DOUBLE_EQ(dec["drafting_ms"].get<double>(), 0);
  EXPECT_DOUBLE_EQ(dec["step_ms"].get<double>(), 30);
  EXPECT_NEAR(dec["communication_share"].get<double>(), 0.5 / 3.0, 1e-12);
  EXPECT_FALSE(dec.contains("link_gbps"));  // comm counters are not split by kind
  const json& pre = j["prefill"];
  EXPECT_DOUBLE_EQ(pre["compute_ms"].get<double>(), 150);
  EXPECT_NEAR(pre["communication_share"].get<double>(), 0.1 / 0.404, 1e-12);
  const json& all = j["all"];
  EXPECT_DOUBLE_EQ(all["steps"].get<double>(), 102);
  EXPECT_DOUBLE_EQ(all["syncs_per_step"].get<double>(), 50);
  EXPECT_DOUBLE_EQ(all["comm_bytes_per_step"].get<double>(), 0.5e6);
  EXPECT_NEAR(all["link_gbps"].get<double>(), 51e6 * 8 / 0.6 / 1e9, 1e-12);  // 0.68 Gb/s
  EXPECT_NEAR(all["communication_share"].get<double>(), 0.6 / 3.404, 1e-12);
  EXPECT_NEAR(communication_share(tp2_cell()), 0.6 / 3.404, 1e-12);
}

TEST(StepPhases, OneProcessAndIdleCells) {
  StepPhaseCounters one;  // one process: communication 0, no comm counters, no layout
  one.steps[kDecode] = 10;
  one.seconds[kDecode][kCompute] = 0.2;
  const json j = parallel_json(one);
  EXPECT_TRUE(j["layout"].is_null());
  EXPECT_TRUE(j["prefill"].is_null());
  EXPECT_DOUBLE_EQ(j["decode"]["communication_share"].get<double>(), 0);
  EXPECT_TRUE(j["all"]["link_gbps"].is_null());
  EXPECT_TRUE(j["all"]["syncs_per_step"].is_null());
  EXPECT_DOUBLE_EQ(communication_share(one), 0);
  const json idle = parallel_json(StepPhaseCounters{});
  EXPECT_TRUE(idle["all"].is_null());
  EXPECT_TRUE(std::isnan(communication_share(StepPhaseCounters{})));
}

TEST(StepPhases, AccumulateSumsCells) {
  StepPhaseCounters total;
  total.comm_bytes = total.comm_syncs = 0;
  accumulate(total, tp2_cell());
  accumulate(total, tp2_cell());
  EXPECT_DOUBLE_EQ(total.steps[kDecode], 200);
  EXPECT_DOUBLE_EQ(total.seconds[kDecode][kCommunicationPhase], 1.0);
  EXPECT_DOUBLE_EQ(total.comm_syncs, 10200);
  EXPECT_EQ(total.layout.at("tp"), "2");
  StepPhaseCounters no_comm = tp2_cell();
  no_comm.comm_bytes = -1;
  accumulate(total, no_comm);
  EXPECT_EQ(total.comm_bytes, -1);
  EXPECT_DOUBLE_EQ(total.comm_syncs, 15300);
}

TEST(StepPhases, TopologyNames) {
  EXPECT_EQ(topology_name(json{{"tp", 2}, {"pp", 1}, {"ranks", 2}}), "2ranks_tp2");
  EXPECT_EQ(topology_name(json{{"hosts", 1}, {"tp", 2}, {"pp", 1}, {"ranks", 2}}), "1host_2ranks_tp2");
  EXPECT_EQ(topology_name(json{{"tp", 2}, {"pp", 2}, {"ranks", 4}, {"backend", "mpi"}}), "4ranks_tp2_backendmpi_pp2");
  EXPECT_EQ(topology_name(json{{"tp", 1}, {"pp", 1}, {"ranks", 1}}), "1rank_tp1");
  EXPECT_EQ(topology_name(nullptr), "");
}

}  // namespace
}  // namespace tokenmill::bench
