// The engine's step time split into phases, read from tokenmill's /metrics:
//   tokenmill_step_phase_seconds{step, phase}  counter, seconds
//   tokenmill_steps_total{step}                counter, steps
//   tokenmill_comm_bytes_total                 counter, bytes this rank's collectives moved
//   tokenmill_comm_syncs_total                 counter, collective operations
//   tokenmill_parallel_info{tp, pp, ranks}     gauge 1; the labels name the layout
// step is "prefill" (the step had prompt tokens) or "decode"; phase is one of
// kStepPhases, where compute + communication is the forward pass and
// communication is time in collectives, waiting for other ranks included.
//
// A cell's figures are counter deltas (end - begin); the report turns them
// into per-step means and the communication share (report JSON below).
#pragma once

#include <array>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/prometheus_text.h"

namespace tokenmill::bench {

inline constexpr size_t kNumStepKinds = 2;
inline constexpr size_t kNumStepPhases = 5;
inline constexpr std::array<const char*, kNumStepKinds> kStepKinds = {"prefill", "decode"};
inline constexpr std::array<const char*, kNumStepPhases> kStepPhases = {"schedule", "drafting", "compute",
                                                                        "communication", "sampling"};
inline constexpr size_t kCommunicationPhase = 3;

struct StepPhaseCounters {
  std::array<std::array<double, kNumStepPhases>, kNumStepKinds> seconds{};  // [kind][phase]
  std::array<double, kNumStepKinds> steps{};                                // [kind]
  double comm_bytes = -1;                                                   // -1: not exported
  double comm_syncs = -1;
  std::map<std::string, std::string> layout;  // tokenmill_parallel_info's labels; empty: not exported
};

// nullopt when the server does not export tokenmill_step_phase_seconds (not
// tokenmill, or an older build). Series absent from an exported family are 0.
std::optional<StepPhaseCounters> read_step_phases(const std::vector<PrometheusSample>& samples);

// end - begin over one cell. `begin` nullopt means the family was not there
// yet at the start (no step had run), so it counts from zero. nullopt when a
// counter went backwards (the server restarted mid-cell). The layout is end's.
std::optional<StepPhaseCounters> step_phase_delta(const std::optional<StepPhaseCounters>& begin,
                                                  const StepPhaseCounters& end);

// Adds one cell's deltas into `total` (the run over several cells). A comm
// counter missing in either becomes missing; the layout is the latest set.
void accumulate(StepPhaseCounters& total, const StepPhaseCounters& cell);

// The share of step time spent communicating, over all step kinds:
// communication seconds / the sum of all phases. The denominator is the sum
// of the phases, not tokenmill_engine_step_seconds_sum, because only the
// phases are split by step kind and a share of the same timers stays within
// [0, 1]; time a step spends outside the five phases is left out. NaN when no
// phase time was recorded.
double communication_share(const StepPhaseCounters& d);

// The report's `server.parallel` object:
//   layout:  tokenmill_parallel_info's labels (integers where numeric) or null
//   all, prefill, decode: null when that kind ran no step, else
//     {steps, schedule_ms, drafting_ms, compute_ms, communication_ms,
//      sampling_ms, step_ms (per-step means; step_ms sums the phases),
//      communication_share}
//   all also carries comm_bytes_per_step, syncs_per_step and link_gbps: the
//   comm counters are not split by step kind. link_gbps = bytes * 8 / the
//   communication seconds / 1e9, an effective rate: it counts waiting for
//   other ranks, so it is below the link's peak when ranks are unbalanced.
nlohmann::json parallel_json(const StepPhaseCounters& d);

// A short name of a layout object as parallel_json writes it, e.g.
// "1host_2ranks_tp2" ({hosts: 1, ranks: 2, tp: 2, pp: 1}); pp and other
// labels appear when present and not 1. "" when the layout is not an object.
std::string topology_name(const nlohmann::json& layout);

}  // namespace tokenmill::bench
