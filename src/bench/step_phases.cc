#include "bench/step_phases.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "bench/json_number.h"

namespace tokenmill::bench {
namespace {

using nlohmann::json;

constexpr const char* kPhaseSeconds = "tokenmill_step_phase_seconds";
constexpr const char* kSteps = "tokenmill_steps_total";
constexpr const char* kCommBytes = "tokenmill_comm_bytes_total";
constexpr const char* kCommSyncs = "tokenmill_comm_syncs_total";
constexpr const char* kParallelInfo = "tokenmill_parallel_info";

bool is_digits(const std::string& s) {
  return !s.empty() && s.size() < 18 && s.find_first_not_of("0123456789") == std::string::npos;
}

// Per-step means of one kind (or of all kinds together); null without steps.
json kind_json(const std::array<double, kNumStepPhases>& seconds, double steps) {
  if (!(steps > 0)) return nullptr;
  json j = {{"steps", steps}};
  double total = 0;
  for (size_t p = 0; p < kNumStepPhases; ++p) {
    j[fmt::format("{}_ms", kStepPhases[p])] = 1000.0 * seconds[p] / steps;
    total += seconds[p];
  }
  j["step_ms"] = 1000.0 * total / steps;
  j["communication_share"] = number_or_null(total > 0 ? seconds[kCommunicationPhase] / total : NAN);
  return j;
}

}  // namespace

std::optional<StepPhaseCounters> read_step_phases(const std::vector<PrometheusSample>& samples) {
  if (!sum_samples(samples, kPhaseSeconds)) return std::nullopt;
  StepPhaseCounters c;
  for (size_t k = 0; k < kNumStepKinds; ++k) {
    for (size_t p = 0; p < kNumStepPhases; ++p) {
      c.seconds[k][p] = *sum_samples(samples, kPhaseSeconds, {{"step", kStepKinds[k]}, {"phase", kStepPhases[p]}});
    }
    c.steps[k] = sum_samples(samples, kSteps, {{"step", kStepKinds[k]}}).value_or(0.0);
  }
  c.comm_bytes = sum_samples(samples, kCommBytes).value_or(-1.0);
  c.comm_syncs = sum_samples(samples, kCommSyncs).value_or(-1.0);
  for (const PrometheusSample& s : samples) {
    if (s.name == kParallelInfo) c.layout = s.labels;
  }
  return c;
}

std::optional<StepPhaseCounters> step_phase_delta(const std::optional<StepPhaseCounters>& begin,
                                                  const StepPhaseCounters& end) {
  const StepPhaseCounters zero;
  const StepPhaseCounters& b = begin ? *begin : zero;
  StepPhaseCounters d;
  for (size_t k = 0; k < kNumStepKinds; ++k) {
    for (size_t p = 0; p < kNumStepPhases; ++p) {
      d.seconds[k][p] = end.seconds[k][p] - b.seconds[k][p];
      if (d.seconds[k][p] < 0) return std::nullopt;
    }
    d.steps[k] = end.steps[k] - b.steps[k];
    if (d.steps[k] < 0) return std::nullopt;
  }
  // A comm counter first seen at the end counts from zero, like the family.
  auto delta = [&](double e, double s) { return e < 0 ? -1.0 : e - std::max(0.0, s); };
  d.comm_bytes = delta(end.comm_bytes, b.comm_bytes);
  d.comm_syncs = delta(end.comm_syncs, b.comm_syncs);
  if ((end.comm_bytes >= 0 && d.comm_bytes < 0) || (end.comm_syncs >= 0 && d.comm_syncs < 0)) return std::nullopt;
  d.layout = end.layout;
  return d;
}

void accumulate(StepPhaseCounters& total, const StepPhaseCounters& cell) {
  for (size_t k = 0; k < kNumStepKinds; ++k) {
    for (size_t p = 0; p < kNumStepPhases; ++p) total.seconds[k][p] += cell.seconds[k][p];
    total.steps[k] += cell.steps[k];
  }
  auto add = [](double& t, double c) { t = t < 0 || c < 0 ? -1.0 : t + c; };
  add(total.comm_bytes, cell.comm_bytes);
  add(total.comm_syncs, cell.comm_syncs);
  if (!cell.layout.empty()) total.layout = cell.layout;
}

double communication_share(const StepPhaseCounters& d) {
  double total = 0, comm = 0;
  for (size_t k = 0; k < kNumStepKinds; ++k) {
    for (size_t p = 0; p < kNumStepPhases; ++p) total += d.seconds[k][p];
    comm += d.seconds[k][kCommunicationPhase];
  }
  return total > 0 ? comm / total : NAN;
}

json parallel_json(const StepPhaseCounters& d) {
  json layout = nullptr;
  if (!d.layout.empty()) {
    layout = json::object();
    for (const auto& [k, v] : d.layout) layout[k] = is_digits(v) ? json(std::stoll(v)) : json(v);
  }
  std::array<double, kNumStepPhases> all_seconds{};
  double all_steps = 0;
  json out = {{"layout", layout}};
  for (size_t k = 0; k < kNumStepKinds; ++k) {
    for (size_t p = 0; p < kNumStepPhases; ++p) all_seconds[p] += d.seconds[k][p];
    all_steps += d.steps[k];
    out[kStepKinds[k]] = kind_json(d.seconds[k], d.steps[k]);
  }
  json all = kind_json(all_seconds, all_steps);
  if (all.is_object()) {
    const double comm_s = all_seconds[kCommunicationPhase];
    all["comm_bytes_per_step"] = number_or_null(d.comm_bytes >= 0 ? d.comm_bytes / all_steps : NAN);
    all["syncs_per_step"] = number_or_null(d.comm_syncs >= 0 ? d.comm_syncs / all_steps : NAN);
    all["link_gbps"] = number_or_null(d.comm_bytes >= 0 && comm_s > 0 ? d.comm_bytes * 8 / comm_s / 1e9 : NAN);
  }
  out["all"] = std::move(all);
  return out;
}

std::string topology_name(const json& layout) {
  if (!layout.is_object()) return "";
  auto text = [](const json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); };
  auto plural = [&](const char* key, const char* one, const char* many) {
    const std::string n = text(layout[key]);
    return n + (n == "1" ? one : many);
  };
  std::vector<std::string> parts;
  if (layout.contains("hosts")) parts.push_back(plural("hosts", "host", "hosts"));
  if (layout.contains("ranks")) parts.push_back(plural("ranks", "rank", "ranks"));
  if (layout.contains("tp")) parts.push_back("tp" + text(layout["tp"]));
  for (const auto& [k, v] : layout.items()) {
    if (k == "hosts" || k == "ranks" || k == "tp" || text(v) == "1") continue;
    parts.push_back(k + text(v));
  }
  return fmt::format("{}", fmt::join(parts, "_"));
}

}  // namespace tokenmill::bench
