// The single-threaded heart of the engine: the model, the paged KV pool,
// the scheduler and the per-request states, driven one step at a time:
//
//   schedule() -> copy-on-write block copies -> SequenceChunks ->
//   Model::forward() -> sample where a chunk ends a prefill or decodes ->
//   commit() (stop checks push token events) -> final events.
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
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/engine_config.h"
#include "engine/metrics.h"
#include "engine/output_stream.h"
#include "engine/request.h"
#include "engine/request_state.h"
#include "kv/paged_kv_storage.h"
#include "kv/prefix_cache.h"
#include "model/model.h"
#include "sample/sampler.h"
#include "sched/scheduler.h"
#include "tokenizer/tokenizer.h"
#include "util/thread_pool.h"

namespace tokenmill::engine {

// What submit() can check without the engine thread.
struct RequestLimits {
  int32_t n_vocab = 0;
  int64_t max_model_len = 0;
  int64_t num_blocks = 0;
  int64_t block_size = 0;
  int64_t max_batch_tokens = 0;
  int64_t prefill_chunk = 0;
  int64_t max_seqs = 1;  // also bounds GenerateRequest::n
  bool has_tokenizer = false;
};

// nullopt when the request may be queued; else why it is refused at once
// (kInvalid, kPromptTooLong, kContextExceeded or kKvNeverFits) and a
// message naming the problem.
struct Refusal {
  RejectReason reason;
  std::string message;
};
std::optional<Refusal> check_request(const GenerateRequest& request, const RequestLimits& limits);

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
  // Ends every request with `reason` (kCancelled at shutdown, kError after
  // an unexpected exception) and `message`.
  void abort_all(sched::FinishReason reason, const std::string& message);

  bool has_work() const { return scheduler_->has_work(); }
  // One engine step. Returns false when it made no progress (nothing ran
  // and nothing finished), so the caller can back off instead of spinning.
  bool step();

  const EngineConfig& config() const { return config_; }
  const model::ModelConfig& model_config() const { return model_->config(); }
  const model::Model& model() const { return *model_; }
  const tokenizer::Tokenizer* tokenizer() const { return tokenizer_ ? &*tokenizer_ : nullptr; }
  const RequestLimits& limits() const { return limits_; }
  const kv::CacheNamespace& cache_namespace() const { return namespace_; }
  // The full-attention pool (every layer with one pool) and the
  // sliding-window pool (0 blocks with one pool).
  int64_t num_kv_blocks() const { return storage_->num_blocks(); }
  int64_t num_window_kv_blocks() const { return window_storage_ ? window_storage_->num_blocks() : 0; }
  // Both pools' bytes.
  int64_t kv_bytes() const { return storage_->total_bytes() + (window_storage_ ? window_storage_->total_bytes() : 0); }
  // Scheduler gauges (block counts of both pools), for tests and tools.
  sched::SchedulerStats scheduler_stats() const { return scheduler_->stats(); }
  // K and V of one position, all layers, quantization scales included.
  // Both pools together (a window-pool position costs this only while it is
  // in the window).
  int64_t kv_bytes_per_token() const {
    return storage_->geometry().bytes_per_token() + (window_storage_ ? window_storage_->geometry().bytes_per_token() : 0);
  }
  // The weight runtime's hook (config().matmul_hook_factory), or null.
  const model::MatmulHook* matmul_hook() const { return matmul_hook_.get(); }
  int num_threads() const { return pool_.num_threads(); }
  int64_t steps() const { return num_steps_; }

 private:
  sched::FinishReason stop_check(const sched::Sequence& seq);
  // Pushes the final event of `id`'s request, as `seq` ended (seq is the
  // request's own sequence, or its parent for a sample not forked yet).
  void finish_request(RequestId id, const sched::Sequence& seq, SteadyClock::time_point now);
  // finish_request for the sequence and for each of its samples not forked yet.
  void finish_sequence(const sched::Sequence& seq, SteadyClock::time_point now);
  void run_batch(const sched::ScheduledBatch& batch, StepStats& stats);
  std::vector<model::SequenceChunk> build_chunks(const sched::ScheduledBatch& batch, StepStats& stats);
  std::vector<std::optional<int32_t>> sample_rows(const sched::ScheduledBatch& batch,
                                                  std::span<const model::SequenceChunk> chunks, StepStats& stats);
  void sample_forks(const sched::Sequence& seq, const RequestState& parent, std::span<const float> row, size_t entry,
                    StepStats& stats);
  void update_gauges();

  EngineConfig config_;
  Metrics& metrics_;
  std::unique_ptr<model::MatmulHook> matmul_hook_;  // declared before model_: outlives the model's use
  std::unique_ptr<model::Model> model_;
  std::optional<tokenizer::Tokenizer> tokenizer_;
  kv::CacheNamespace namespace_;
  RequestLimits limits_;
  std::unique_ptr<kv::PagedKvStorage> storage_;         // full-attention layers, or all
  std::unique_ptr<kv::PagedKvStorage> window_storage_;  // sliding-window layers; null: one pool
  std::unique_ptr<sched::Scheduler> scheduler_;
  ThreadPool pool_;
  std::unordered_map<RequestId, RequestState> states_;
  std::unordered_map<RequestId, RequestId> fork_parent_;  // samples not forked yet -> sample 0
  sample::SamplerScratch sampler_scratch_;
  std::vector<std::vector<int32_t>> chunk_tokens_;  // per batch entry, this step
  std::vector<float> logits_;                       // [logits rows, n_vocab]
  std::vector<std::vector<int32_t>> fork_tokens_;   // per batch entry: first tokens of its forks
  SteadyClock::time_point commit_time_{};           // `now` of the commit in progress
  int64_t num_steps_ = 0;
};

}  // namespace tokenmill::engine
