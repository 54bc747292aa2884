// Speculative decoding as the engine step's stage (EngineConfig::spec):
//
//   propose   before schedule: a draft length per decoding sequence (k, or
//             what the cost model says pays) and the draft by prompt
//             lookup, or placeholders a model fills once scheduled
//   draft     between the step's block copies and its forward pass
//             (ModelRunner::run's before_forward): the draft model's, or
//             the target's with layers skipped, passes over those drafts
//   verify    while sampling: an entry's draft against the target's rows
//
// It owns the drafting machinery (cost model, acceptance estimate, skipped
// layers, draft model); the per-request drafting state lives in each
// RequestState, which it reads and writes through `states`.
//
// Thread-safety: none (the engine thread).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "engine/engine_config.h"
#include "engine/metrics.h"
#include "engine/request_state.h"
#include "runner/model_runner.h"
#include "sample/sampler.h"
#include "sched/scheduler.h"
#include "spec/cost_model.h"
#include "spec/draft_model.h"
#include "util/thread_pool.h"

namespace tokenmill::engine {

// The engine's per-request states, by request id.
using RequestStates = std::unordered_map<RequestId, RequestState>;

class Speculator {
 public:
  // Loads the draft model (config.spec.method kDraft) with as many KV bytes
  // as the target's pools. `model`, `runner`, `states`, `metrics` and `pool`
  // must outlive it. Throws Error for a bad draft model.
  Speculator(const EngineConfig& config, const model::Model& model, runner::ModelRunner& runner, RequestStates& states,
             Metrics& metrics, ThreadPool& pool);

  // Before schedule(): sets each running sequence's draft.
  void propose(sched::Scheduler& scheduler, StepStats& stats);
  // After the step's block copies, before its forward pass: fills the
  // scheduled placeholder drafts from a model (a no-op for prompt lookup).
  void draft(const sched::ScheduledBatch& batch, StepStats& stats);
  // The forward pass of `batch` took stats.forward_ms: the cost model learns
  // from decode-only steps.
  void observe_forward(const sched::ScheduledBatch& batch, const StepStats& stats);
  // Entry i's draft (s.num_draft > 0) verified against its rows of `logits`.
  void verify(const sched::ScheduledSeq& s, const runner::StepLogits& logits, size_t i, sched::SampledEntry& entry,
              StepStats& stats);
  // The request ended: the draft model drops its KV.
  void release(RequestId id);

 private:
  // Draft pass j's logits for `feeds` (tokens per drafting entry), from
  // the draft model or the target with skip_layers_.
  runner::StepLogits draft_pass(std::span<const sched::ScheduledSeq* const> entries,
                                std::span<const std::span<const int32_t>> feeds, int64_t j);

  spec::SpecConfig config_;
  runner::ModelRunner& runner_;
  RequestStates& states_;
  Metrics& metrics_;
  sample::SamplerScratch sampler_scratch_;
  spec::SpecCostModel cost_model_;                 // adaptive k (SpecConfig::adaptive)
  spec::AcceptanceEstimate acceptance_{0.99};      // over every request: each one's prior
  std::vector<uint8_t> skip_layers_;               // self-speculation: the layers its drafts leave out
  std::unique_ptr<spec::DraftModel> draft_model_;  // --spec draft
};

}  // namespace tokenmill::engine
