#include "bench/capacity_step.h"

#include <gtest/gtest.h>

#include <cmath>

namespace tokenmill::bench {
namespace {

// An ok request scheduled at `scheduled` (NaN: closed loop), sent at `send`,
// its first of `n` tokens at send + ttft, one every `gap` ms after that.
RequestRecord ok_request(double scheduled, double send, double ttft, int n, double gap) {
  RequestRecord r;
  r.status = RequestStatus::kOk;
  r.scheduled_ms = scheduled;
  r.send_ms = send;
  for (int i = 0; i < n; ++i) r.chunk_ms.push_back(send + ttft + i * gap);
  r.first_token_ms = r.chunk_ms.front();
  r.end_ms = r.chunk_ms.back();
  r.output_tokens = n;
  return r;
}

RequestRecord failed(RequestStatus s) {
  RequestRecord r;
  r.status = s;
  r.send_ms = 0;
  r.end_ms = 10;
  return r;
}

StepCriteria criteria(double ttft, double tpot, double e2e, double min_goodput = 0.9) {
  StepCriteria c;
  c.slo = Slo{ttft, tpot, e2e};
  c.min_goodput = min_goodput;
  return c;
}

TEST(CapacityStep, LatencyCountsFromTheScheduledArrival) {
  CellRun cell;
  // Scheduled at 0 but sent at 300 (no free client): TTFT from arrival 400.
  cell.records.push_back(ok_request(0, 300, 100, 5, 10));
  cell.window_start_ms = 300;
  cell.window_end_ms = 1300;
  const StepMeasure m = measure_step(cell, criteria(350, 0, 0));
  EXPECT_DOUBLE_EQ(m.ttft.p50, 400);
  EXPECT_DOUBLE_EQ(m.e2e.p50, 440);
  EXPECT_DOUBLE_EQ(m.tpot.p50, 10);
  EXPECT_EQ(m.good, 0);
  std::vector<std::string> reasons;
  EXPECT_FALSE(step_meets(m, criteria(350, 0, 0), reasons));
  ASSERT_EQ(reasons.size(), 2u);
  EXPECT_EQ(reasons[0], "TTFT p99 400.0 ms > 350 ms");
  EXPECT_EQ(reasons[1], "goodput 0.0 % < 90 %");
  // Closed loop (no schedule): from the send.
  cell.records[0].scheduled_ms = kNaN;
  EXPECT_DOUBLE_EQ(measure_step(cell, criteria(350, 0, 0)).ttft.p50, 100);
}

TEST(CapacityStep, ArrivalRateIsTheSamplesOwnBesideTheServedRate) {
  // Five arrivals one second apart, each served in 500 ms: 4 gaps over 4 s
  // is 1 req/s arrived; 5 ok over the 4.5 s from the first send to the
  // last end is 1.11 ok req/s (so a short step's ok req/s may pass its
  // arrival rate: the window counts n requests, the arrivals n - 1 gaps).
  CellRun cell;
  for (int i = 0; i < 5; ++i) cell.records.push_back(ok_request(1000.0 * i, 1000.0 * i, 100, 5, 100));
  cell.window_start_ms = 0;
  cell.window_end_ms = 4500;
  const StepMeasure m = measure_step(cell, criteria(0, 0, 0));
  EXPECT_DOUBLE_EQ(m.arrived_req_per_s, 1.0);
  EXPECT_DOUBLE_EQ(m.window_s, 4.5);
  EXPECT_DOUBLE_EQ(m.achieved_req_per_s, 5 / 4.5);
  EXPECT_DOUBLE_EQ(step_measure_json(m)["arrived_req_per_s"].get<double>(), 1.0);
  // Late sends do not move the arrivals: they are the schedule's.
  cell.records[4].send_ms = 4400;
  EXPECT_DOUBLE_EQ(measure_step(cell, criteria(0, 0, 0)).arrived_req_per_s, 1.0);
  // One request has no rate of arrival.
  cell.records.resize(1);
  EXPECT_EQ(measure_step(cell, criteria(0, 0, 0)).arrived_req_per_s, 0.0);
}

TEST(CapacityStep, GoodputCountsFailuresButNotCancellations) {
  CellRun cell;
  for (int i = 0; i < 16; ++i) cell.records.push_back(ok_request(kNaN, 100.0 * i, 50, 4, 20));
  cell.records.push_back(failed(RequestStatus::kRejected));
  cell.records.push_back(failed(RequestStatus::kError));
  cell.records.push_back(failed(RequestStatus::kCancelled));
  cell.records.push_back(failed(RequestStatus::kNotSent));
  cell.window_start_ms = 0;
  cell.window_end_ms = 2000;
  const StepCriteria c = criteria(100, 30, 200);
  const StepMeasure m = measure_step(cell, c);
  EXPECT_EQ(m.sent, 19);
  EXPECT_EQ(m.ok, 16);
  EXPECT_EQ(m.good, 16);
  EXPECT_EQ(m.rejected, 1);
  EXPECT_EQ(m.errors, 1);
  EXPECT_DOUBLE_EQ(m.goodput_share, 16.0 / 18.0);  // the cancelled one is left out
  EXPECT_DOUBLE_EQ(m.achieved_req_per_s, 8);
  EXPECT_DOUBLE_EQ(m.goodput_req_per_s, 8);
  std::vector<std::string> reasons;
  EXPECT_FALSE(step_meets(m, c, reasons));  // 88.9 % < 90 %
  EXPECT_TRUE(step_meets(m, criteria(100, 30, 200, 0.85), reasons)) << reasons.front();
  EXPECT_TRUE(reasons.empty());
}

TEST(CapacityStep, EachSloIsJudgedAtThePercentile) {
  CellRun cell;
  for (int i = 0; i < 100; ++i) cell.records.push_back(ok_request(kNaN, 0, i < 95 ? 10 : 900, 3, 40));
  cell.window_end_ms = 1000;
  StepCriteria c = criteria(500, 50, 0, 0.9);
  std::vector<std::string> reasons;
  EXPECT_FALSE(step_meets(measure_step(cell, c), c, reasons));  // p99 TTFT is a slow one
  ASSERT_EQ(reasons.size(), 1u);
  EXPECT_EQ(reasons[0].rfind("TTFT p99 ", 0), 0u) << reasons[0];
  c.percentile = 90;
  EXPECT_TRUE(step_meets(measure_step(cell, c), c, reasons));
  c.slo.tpot_ms = 30;  // every request's TPOT is 40 ms
  EXPECT_FALSE(step_meets(measure_step(cell, c), c, reasons));
  EXPECT_EQ(reasons.size(), 2u);  // TPOT and goodput
}

TEST(CapacityStep, NoOkRequestsFails) {
  CellRun cell;
  cell.records.push_back(failed(RequestStatus::kTimeout));
  cell.window_end_ms = 10;
  const StepCriteria c = criteria(100, 0, 0, 0);
  const StepMeasure m = measure_step(cell, c);
  EXPECT_TRUE(std::isnan(m.ttft.p99));
  std::vector<std::string> reasons;
  EXPECT_FALSE(step_meets(m, c, reasons));
  EXPECT_EQ(reasons.front(), "no ok requests (1 sent)");
}

}  // namespace
}  // namespace tokenmill::bench
