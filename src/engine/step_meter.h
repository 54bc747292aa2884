// The metrics observer of one engine step: it fills the step's StepStats
// with its clock (step, forward pass, sampling) and the parallel runtime's
// collectives (the whole step's and the forward pass's share), as the
// engine's stages tell it where each begins and ends. The token counts are
// the stages' own to add.
//
// Thread-safety: none (the engine thread). Cost: a clock read and, with a
// parallel runtime, a stats() read per mark.
#pragma once

#include "engine/metrics.h"
#include "model/model.h"
#include "model/parallel.h"
#include "util/clock.h"

namespace tokenmill::engine {

class StepMeter {
 public:
  // Starts the step's clock. `comm`: the parallel runtime, or null with one
  // process (zero communication).
  explicit StepMeter(const model::ParallelComm* comm);

  SteadyClock::time_point start() const { return start_; }
  StepStats& stats() { return stats_; }

  // Marks around the forward pass (drafting excluded); forward_ends also
  // records the pass's tokens per expert from `model` (mixture of experts).
  void forward_begins();
  void forward_ends(const model::Model& model);
  // Marks around sampling and stop checks.
  void sampling_begins() { sampling_start_ = SteadyClock::now(); }
  void sampling_ends() { stats_.sampling_ms = ms_since(sampling_start_); }
  // The step's total time and collectives; the stats are complete.
  const StepStats& finish();

 private:
  model::CommStats comm_stats() const;

  const model::ParallelComm* comm_;
  SteadyClock::time_point start_;
  model::CommStats comm_start_;
  SteadyClock::time_point forward_start_;
  double forward_comm_start_s_ = 0;
  SteadyClock::time_point sampling_start_;
  StepStats stats_;
};

}  // namespace tokenmill::engine
