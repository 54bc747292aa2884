// The in-process serving engine: what the HTTP server and the benchmarks
// drive. Callers submit GenerateRequests from any thread and read their
// output streams; ONE engine thread owns the model, the KV pool, the
// scheduler and every sequence, and runs the step loop (engine_core.h):
//
//   drain the inbox (new requests, cancels) -> schedule -> run (block
//   copies, forward pass) -> sample (and stop checks) -> commit -> emit
//   (token events, final events) -> repeat; sleep on a condition variable
//   when idle.
//
// Callers never run model compute. Only the inbox (here) and the output
// streams (output_stream.h) are shared between threads.
//
// Example:
//   Engine engine(config);                       // loads the model, starts the thread
//   RequestHandle h = engine.submit(request);    // returns at once
//   while (auto e = h.next()) { if (e->token) print(e->token->text); }
//   engine.stop();                               // or let the destructor abort
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "engine/engine_config.h"
#include "engine/engine_core.h"
#include "engine/metrics.h"
#include "engine/output_stream.h"
#include "engine/request.h"

namespace tokenmill::engine {

class Engine {
 public:
  // Loads the model (with config.matmul_hook_factory's weight runtime, if
  // any) and starts the engine thread. Throws Error for a bad config, model
  // file, weight runtime or KV budget.
  explicit Engine(const EngineConfig& config);
  // stop(StopMode::kAbort) if still running.
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Thread-safe; never blocks on the engine thread. Invalid requests and
  // those that can never fit end their stream before this returns
  // (FinishReason::kRejected, see check_request); the queue and KV checks
  // (kQueueFull, kKvExhausted) happen when the engine thread takes it.
  // Precondition-free: request.n != 1 is refused (kInvalid) here; use
  // submit_samples for parallel samples.
  RequestHandle submit(GenerateRequest request);
  // Parallel samples: request.n handles, one per sample (sample k seeded
  // with sampling.seed + k), sharing one prefill of the prompt and, after
  // the fork, its KV blocks copy-on-write. Refusals end every handle's
  // stream alike. Each handle cancels its own sample, except that before
  // the prompt's prefill completes, cancelling sample 0 (which carries the
  // prefill) ends them all.
  std::vector<RequestHandle> submit_samples(GenerateRequest request);
  // Same as the handle's cancel(); unknown or finished ids are ignored.
  void cancel(RequestId id);
  // Holds or resumes one request (RequestHandle::set_paused; one sample of
  // parallel samples). Thread-safe, through the inbox like cancel; takes
  // effect at the next step; unknown or finished ids are ignored. While the
  // engine drains (stop(kDrain)) every request is resumed, so a paused one
  // cannot hold the shutdown.
  void set_paused(RequestId id, bool paused);

  enum class StopMode {
    kDrain,  // refuse new requests, finish the ones already submitted
    kAbort,  // end every request now with kCancelled
  };
  // Stops the engine thread and joins it. Idempotent; later submits are
  // rejected with kShuttingDown.
  void stop(StopMode mode = StopMode::kAbort);

  // (Not to be confused with set_paused, which holds one request.)
  // Holds the step loop between steps (the current step completes first;
  // returns once the engine thread is parked). Submissions queue up and are
  // taken together on resume(): tests use it to control arrival order.
  void pause();
  void resume();

  MetricsSnapshot metrics() const { return metrics_.snapshot(); }

  // Immutable after construction; safe from any thread.
  const model::ModelConfig& model_config() const { return core_->model_config(); }
  // What LoRA adapters are loaded against (model::LoraAdapter::load).
  const model::Model& model() const { return core_->model(); }
  // The model file the engine loaded (its metadata: chat template, FIM
  // tokens, names), open and mapped for the engine's lifetime.
  const gguf::GgufFile& model_file() const { return core_->model().file(); }
  const tokenizer::Tokenizer* tokenizer() const { return core_->tokenizer(); }
  const RequestLimits& limits() const { return core_->limits(); }
  const EngineConfig& config() const { return core_->config(); }
  int64_t num_kv_blocks() const { return core_->num_kv_blocks(); }
  int64_t num_window_kv_blocks() const { return core_->num_window_kv_blocks(); }
  int64_t kv_bytes() const { return core_->kv_bytes(); }
  int64_t kv_bytes_per_token() const { return core_->kv_bytes_per_token(); }
  const model::MatmulHook* matmul_hook() const { return core_->matmul_hook(); }
  int num_threads() const { return core_->num_threads(); }

 private:
  // The thread-safe part shared with the streams' cancel callbacks (held
  // weakly there, so handles may outlive the engine).
  struct Inbox : RequestControl {
    std::mutex mutex;
    std::condition_variable wake;    // engine thread waits here
    std::condition_variable parked;  // pause() waits here
    struct Submission {
      std::vector<std::shared_ptr<RequestStream>> streams;  // one per sample
      GenerateRequest request;
      SteadyClock::time_point submitted;
    };
    std::vector<Submission> submissions;
    std::vector<RequestId> cancels;
    std::vector<std::pair<RequestId, bool>> pauses;  // set_paused, in order
    bool paused = false;
    bool is_parked = false;
    bool stopping = false;
    StopMode stop_mode = StopMode::kAbort;

    void cancel(RequestId id) override;
    void set_paused(RequestId id, bool paused) override;
  };

  void loop();
  void wait_for_work(std::unique_lock<std::mutex>& lock, bool backoff);
  void reject(RequestStream& stream, RejectReason reason, std::string message);
  std::shared_ptr<RequestStream> new_stream();

  Metrics metrics_;
  std::unique_ptr<EngineCore> core_;
  std::shared_ptr<Inbox> inbox_;
  std::atomic<RequestId> next_id_{1};
  std::thread thread_;
  std::mutex stop_mutex_;  // serialises stop() callers
};

}  // namespace tokenmill::engine
