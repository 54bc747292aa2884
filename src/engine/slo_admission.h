// SLO-aware admission: refuse at once the requests that could not get
// their latency targets, before any work is spent on them, instead of
// queueing everyone and missing the targets for all.
//
// Targets (EngineConfig::slo, all optional): time to first token, time per
// output token, end-to-end latency. A new request is forecast
// (sched/slo_forecast.h) with the step costs measured online
// (sched/step_cost_model.h) and its expected output length (max_tokens
// times the share of max_tokens that recent requests used). It is refused
// (kSloUnattainable, with a Retry-After estimate) when
//   - its own forecast TTFT, TPOT or end-to-end time misses a target, or
//   - admitting it would make a request of its class or a higher one miss
//     a target that request would otherwise meet (a forecast with and
//     one without it). Requests of a lower class do not count: a
//     high-priority request may push a low-priority one out.
// Each step, waiting requests that never ran are checked again (their
// forecast moves as others arrive ahead of them, or as costs change) and
// refused once their TTFT or end-to-end target is out of reach: a request
// is queued only as long as it can still make it.
//
// The forecast knows the queue of now, not the requests still to come; it
// need not guess them: each later arrival is admitted only if it pushes no
// admitted request of its class past a target. So an admitted request's
// TPOT may well end above its forecast (arrivals joined its batch), but
// not above the target, as far as the forecasts hold.
//
// Until the cost model has seen both kinds of step everything is admitted
// (there is nothing to forecast with). The forecast's error (forecast vs
// actual TTFT and TPOT of the admitted requests that completed) goes to
// the metrics, as do the step costs.
//
// Thread-safety: none (the engine thread).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/metrics.h"
#include "engine/output_stream.h"
#include "engine/slo_targets.h"
#include "sched/scheduler.h"
#include "sched/sequence.h"
#include "sched/slo_forecast.h"
#include "sched/step_cost_model.h"

namespace tokenmill::engine {

struct SloRefusal {
  std::string message;   // which target, forecast vs target
  double retry_after_s;  // when a retry may succeed (>= 1)
};

class SloAdmission {
 public:
  SloAdmission(const SloTargets& targets, const sched::ForecastLimits& limits, Metrics& metrics);

  // Every step the engine ran: the cost model's evidence.
  void observe_step(const StepStats& step);

  // Whether `candidate` (a new sequence, not yet queued) may be admitted
  // into the scheduler's current queue (Scheduler::ranked). cached_tokens:
  // how much of its prompt the prefix cache holds now (PrefixCache::lookup),
  // which it will not prefill; kept as its estimate while it waits. On
  // admission its forecast is kept for the error metrics.
  std::optional<SloRefusal> check(const sched::Sequence& candidate, std::span<const sched::RankedSequence> ranked,
                                  SteadyClock::time_point now, int64_t cached_tokens = 0);

  // The waiting sequences that never ran and can no longer meet their TTFT
  // or end-to-end target, each with why.
  std::vector<std::pair<uint64_t, SloRefusal>> unattainable(std::span<const sched::RankedSequence> ranked,
                                                            SteadyClock::time_point now);

  // A request's final event: records the forecast's error for one that
  // completed, learns the share of max_tokens used, and sets retry_after_s
  // of an SLO refusal. `max_tokens` is the request's.
  void on_final(uint64_t id, int64_t max_tokens, FinalEvent& final);

  const sched::StepCostModel& cost() const { return cost_; }
  double output_share() const { return output_share_; }

  // The forecast runs at most this far ahead (ms).
  static constexpr double kHorizonMs = 600e3;
  // Weight of each completed request in the share of max_tokens used.
  static constexpr double kShareWeight = 0.1;

 private:
  struct Prediction {
    double ttft_ms = 0;
    double tpot_ms = 0;
  };
  // Expected output tokens of a sequence in all (already generated included).
  int64_t expected_output(const sched::Sequence& seq) const;
  sched::ForecastSeq forecast_seq(const sched::Sequence& seq, bool running) const;
  // Forecast, TTFT (from arrival), TPOT and end-to-end ms of one sequence.
  struct Outlook {
    double ttft_ms, tpot_ms, e2e_ms;
  };
  Outlook outlook(const sched::Sequence& seq, const sched::SeqForecast& f, SteadyClock::time_point now) const;
  // The first target `o` misses, described; nullopt when it meets them all.
  std::optional<std::string> missed(const Outlook& o, bool check_tpot) const;

  SloTargets targets_;
  sched::ForecastLimits limits_;
  Metrics& metrics_;
  sched::StepCostModel cost_;
  double output_share_ = 1.0;  // of max_tokens, expected to be generated
  std::unordered_map<uint64_t, Prediction> predictions_;
  std::unordered_map<uint64_t, double> retry_after_s_;   // refused ones, until their final event
  std::unordered_map<uint64_t, int64_t> cached_tokens_;  // admitted ones' prefix-cache estimate, until they end
};

}  // namespace tokenmill::engine
