// The single-threaded heart of the engine: the model runner (model + paged
// KV pools), the scheduler and the per-request states, driven one step at a
// time. A step (step()) is five beats, each a named function:
//
//   schedule  Scheduler::schedule: what runs (ScheduledBatch), after the
//             speculator's drafts (propose) and the SLO admission's
//             refusals of queued requests that can no longer meet targets
//   run       ModelRunner::run: block copies, the speculator's drafts from
//             a model (its before_forward hook), the forward pass
//             (StepLogits)
//   sample    RequestState::sample per sampling entry and fork, then
//             accept_token decides stops (SampledStep); an entry with a
//             draft is verified token by token (Speculator::verify)
//   commit    Scheduler::commit: appends, forks, frees what finished
//   emit      token events, then the final events of finished requests
//
// Around them, observers: speculative decoding (Speculator, speculator.h),
// SLO admission (SloAdmission, at add() and in schedule), and the metrics:
// a StepMeter (step_meter.h) times the step, the forward pass and sampling
// and counts the collectives; observe_step hands the stats to the metrics
// and the SLO cost model; update_gauges publishes the scheduler's gauges.
//
// Engine (engine.h) wraps it with a thread and a thread-safe inbox; tests
// may also drive it directly, step by step, for exact scheduling checks.
//
// Thread-safety: none, except the const accessors of immutable parts
// (model config, tokenizer, limits), which any thread may read.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/engine_config.h"
#include "engine/metrics.h"
#include "engine/output_stream.h"
#include "engine/request.h"
#include "engine/request_limits.h"
#include "engine/request_state.h"
#include "engine/slo_admission.h"
#include "engine/speculator.h"
#include "engine/step_meter.h"
#include "kv/paged_kv_storage.h"
#include "kv/prefix_cache.h"
#include "model/model.h"
#include "runner/model_runner.h"
#include "sample/sampler.h"
#include "sched/scheduler.h"
#include "tokenizer/tokenizer.h"
#include "util/thread_pool.h"

namespace tokenmill::engine {

class EngineCore {
 public:
  // Loads the model and tokenizer, installs the weight runtime's hook
  // (config.matmul_hook_factory), sizes and allocates the KV pool and
  // reports its layout to `metrics`. Throws Error for a bad config, model
  // file or runtime.
  EngineCore(const EngineConfig& config, Metrics& metrics);
  ~EngineCore();

  // Queues a request: one stream per sample (streams.size() == request.n;
  // sample k seeded with sampling.seed + k). One that check_request refuses,
  // or that the scheduler rejects, ends every stream at once.
  void add(std::vector<std::shared_ptr<RequestStream>> streams, const GenerateRequest& request,
           SteadyClock::time_point submitted);
  // Ends the request at the next step (kCancelled); unknown ids are ignored.
  // A sample not forked yet ends at once (sample 0 ends all; see
  // Engine::submit_samples).
  void cancel(RequestId id);
  // Holds or resumes a request (Engine::set_paused); unknown ids are ignored.
  void set_paused(RequestId id, bool paused);
  void resume_all();
  // Ends every request with `reason` (kCancelled at shutdown, kError after
  // an unexpected exception) and `message`.
  void abort_all(FinishReason reason, const std::string& message);

  bool has_work() const { return scheduler_->has_work(); }
  // One engine step. Returns false when it made no progress (nothing ran
  // and nothing finished), so the caller can back off instead of spinning.
  bool step();

  const EngineConfig& config() const { return config_; }
  const model::ModelConfig& model_config() const { return model_->config(); }
  const model::Model& model() const { return *model_; }
  const tokenizer::Tokenizer* tokenizer() const { return tokenizer_.get(); }
  const RequestLimits& limits() const { return limits_; }
  const kv::CacheNamespace& cache_namespace() const { return namespace_; }
  // The full-attention pool (every layer with one pool) and the
  // sliding-window pool (0 blocks with one pool).
  int64_t num_kv_blocks() const { return runner_->pool(0).num_blocks(); }
  int64_t num_window_kv_blocks() const { return runner_->num_pools() > 1 ? runner_->pool(1).num_blocks() : 0; }
  // Both pools' bytes.
  int64_t kv_bytes() const { return runner_->kv_bytes(); }
  // Scheduler gauges (block counts of KV group 0, and of the other groups
  // together), for tests and tools.
  sched::SchedulerStats scheduler_stats() const { return scheduler_->stats(); }
  // K and V of one position, all layers, quantization scales included.
  // Both pools together (a window-pool position costs this only while it is
  // in the window).
  int64_t kv_bytes_per_token() const { return runner_->kv_bytes_per_token(); }
  // The weight runtime's hook (config().matmul_hook_factory), or null.
  const model::MatmulHook* matmul_hook() const { return matmul_hook_.get(); }
  int num_threads() const { return pool_.num_threads(); }
  int64_t steps() const { return num_steps_; }

 private:
  // The constructor's parts, in order.
  void load_model();
  std::vector<sched::KvGroupConfig> create_kv_pools();
  sched::SchedulerConfig scheduler_config(std::vector<sched::KvGroupConfig> kv_groups) const;
  RequestLimits request_limits(const sched::SchedulerConfig& sc) const;

  // Pushes the final event of `id`'s request, as `seq` ended (seq is the
  // request's own sequence, or its parent for a sample not forked yet).
  void finish_request(RequestId id, const sched::Sequence& seq, SteadyClock::time_point now);
  // finish_request for the sequence and for each of its samples not forked yet.
  void finish_sequence(const sched::Sequence& seq, SteadyClock::time_point now);

  // The step's beats (see the top of this file).
  struct SampledTokens {
    sched::SampledStep step;
    SteadyClock::time_point at;  // after sampling: the stop checks' and the commit's time
  };
  sched::ScheduledBatch schedule(StepMeter& meter);
  std::optional<runner::StepLogits> run(const sched::ScheduledBatch& batch, std::span<const model::LogitRows> rows,
                                        StepMeter& meter);
  SampledTokens sample(const sched::ScheduledBatch& batch, std::span<const model::LogitRows> rows,
                       const runner::StepLogits& logits, StepMeter& meter);
  std::vector<std::unique_ptr<sched::Sequence>> commit(const sched::ScheduledBatch& batch, const SampledTokens& sampled,
                                                       const StepStats& stats);
  void emit(const sched::SampledStep& sampled, std::span<const std::unique_ptr<sched::Sequence>> finished,
            SteadyClock::time_point now);

  // Parts of the beats.
  std::vector<model::LogitRows> logit_rows(const sched::ScheduledBatch& batch, StepStats& stats);
  // Per entry, whether the step outputs its chunk's final hidden states
  // (embedding requests that still need them).
  std::vector<uint8_t> hidden_rows(const sched::ScheduledBatch& batch);
  sched::SampledStep sample_tokens(const sched::ScheduledBatch& batch, std::span<const model::LogitRows> rows,
                                   const runner::StepLogits& logits, StepStats& stats);
  void check_stops(const sched::ScheduledBatch& batch, sched::SampledStep& sampled, SteadyClock::time_point now);

  // Observers.
  // SLO-aware admission: refuses `seq` (already in states_) when it cannot
  // meet its targets; true when it did.
  bool refuse_unattainable(sched::Sequence& seq, SteadyClock::time_point now);
  // SLO-aware admission, each step: rejects the queued requests that can no
  // longer meet their targets.
  void refuse_unattainable_queued(SteadyClock::time_point now);
  void observe_step(const StepStats& stats);
  void update_gauges();

  EngineConfig config_;
  Metrics& metrics_;
  std::unique_ptr<model::MatmulHook> matmul_hook_;  // declared before model_: outlives the model's use
  std::unique_ptr<model::Model> model_;
  std::shared_ptr<const tokenizer::Tokenizer> tokenizer_;  // null: the model has none
  kv::CacheNamespace namespace_;
  RequestLimits limits_;
  ThreadPool pool_;
  std::unique_ptr<runner::ModelRunner> runner_;
  std::unique_ptr<sched::Scheduler> scheduler_;
  std::unordered_map<RequestId, RequestState> states_;
  std::unordered_map<RequestId, RequestId> fork_parent_;  // samples not forked yet -> sample 0
  sample::SamplerScratch sampler_scratch_;
  std::unique_ptr<Speculator> spec_;   // EngineConfig::spec, when enabled
  std::unique_ptr<SloAdmission> slo_;  // EngineConfig::slo, when a target is set
  int64_t num_steps_ = 0;
};

}  // namespace tokenmill::engine
