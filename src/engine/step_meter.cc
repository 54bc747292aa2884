#include "engine/step_meter.h"

namespace tokenmill::engine {

StepMeter::StepMeter(const model::ParallelComm* comm)
    : comm_(comm), start_(SteadyClock::now()), comm_start_(comm_stats()) {}

model::CommStats StepMeter::comm_stats() const { return comm_ != nullptr ? comm_->stats() : model::CommStats{}; }

void StepMeter::forward_begins() {
  forward_start_ = SteadyClock::now();
  forward_comm_start_s_ = comm_stats().seconds;
}

void StepMeter::forward_ends(const model::Model& model) {
  stats_.forward_ms = ms_since(forward_start_);
  // The target pass's tokens per expert (mixture-of-experts models).
  const std::span<const int64_t> load = model.expert_load();
  const int64_t n_expert = model.config().n_expert;
  if (!load.empty() && n_expert != 0) {
    stats_.expert_tokens.assign(static_cast<size_t>(n_expert), 0);
    for (size_t i = 0; i < load.size(); ++i) stats_.expert_tokens[i % static_cast<size_t>(n_expert)] += load[i];
    stats_.expert_imbalance = expert_imbalance(load, n_expert);
  }
  stats_.forward_comm_ms = (comm_stats().seconds - forward_comm_start_s_) * 1e3;
}

const StepStats& StepMeter::finish() {
  stats_.step_ms = ms_since(start_);
  const model::CommStats end = comm_stats();
  stats_.comm_ms = (end.seconds - comm_start_.seconds) * 1e3;
  stats_.comm_bytes = static_cast<int64_t>(end.bytes - comm_start_.bytes);
  stats_.comm_syncs = static_cast<int64_t>(end.syncs - comm_start_.syncs);
  return stats_;
}

}  // namespace tokenmill::engine
