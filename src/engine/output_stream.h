// What a request produces: a thread-safe stream of events that the engine
// thread pushes and one consumer (an HTTP connection, a benchmark, a test)
// pulls. A stream carries zero or more TokenEvents and ends with exactly one
// FinalEvent; nothing follows the final event.
//
// Thread-safety: RequestStream and RequestHandle may be used from any thread.
// The engine thread is the only producer; consumers may be several, but each
// event is delivered to exactly one next()/try_next() call.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sched/request_outcome.h"

namespace tokenmill::engine {

using RequestId = uint64_t;

// The outcome enums are the scheduler's (one family from sequence to HTTP).
using sched::finish_reason_name;
using sched::FinishReason;
using sched::is_transient;
using sched::kNumFinishReasons;
using sched::kNumRejectReasons;
using sched::reject_reason_name;
using sched::RejectReason;

// Log-probabilities of a generated token under the model's plain softmax
// (temperature 1, no filters), as the OpenAI API reports them.
struct TokenLogprob {
  float logprob = 0.0f;
  std::vector<std::pair<int32_t, float>> top;  // best first; empty unless asked for
  int32_t rank = 0;                            // prompt tokens: 1 + the tokens more probable than it; 0 = not computed
};

struct TokenEvent {
  int32_t token = -1;
  // The newly complete text: never a broken UTF-8 character; text that may
  // begin a stop string is held back until it is decided (so it can be "").
  std::string text;
  std::optional<TokenLogprob> logprob;  // when the request asked for logprobs
  // Only on the stream's first event (this, or the final event when no
  // token is streamed): see FinalEvent::prompt_logprobs.
  std::vector<TokenLogprob> prompt_logprobs;
};

struct Usage {
  int64_t prompt_tokens = 0;
  int64_t cached_prompt_tokens = 0;  // of prompt_tokens, served from the prefix cache
  int64_t completion_tokens = 0;
};

// Milliseconds, measured on the engine's steady clock from submit().
struct Timings {
  double queue_ms = 0;    // submit -> first scheduled
  double prefill_ms = 0;  // first scheduled -> first token
  double ttft_ms = 0;     // submit -> first token
  double decode_ms = 0;   // first token -> last token
  double tpot_ms = 0;     // decode_ms / (completion_tokens - 1); 0 with < 2 tokens
  double e2e_ms = 0;      // submit -> final event
  // The forward passes the request took part in (each whole, shared with
  // its batch): compute, and collectives with other ranks (0 with one process).
  double forward_compute_ms = 0;
  double forward_comm_ms = 0;
  // Positions of this request the KV policy evicted (kv/kv_policy.h): > 0
  // means later tokens attended a compressed context.
  int64_t kv_evicted_tokens = 0;
};

// Speculative decoding's tally for one request.
struct SpecStats {
  int64_t draft_tokens = 0;     // proposed and verified
  int64_t accepted_tokens = 0;  // of those, kept
};

struct FinalEvent {
  FinishReason reason = FinishReason::kStop;
  RejectReason reject = RejectReason::kNone;
  std::string error;  // human-readable; empty for stop/length
  // A transient refusal's estimate of when a retry may succeed (seconds;
  // 0 = none given). Set for kSloUnattainable.
  double retry_after_s = 0;
  // Text released only at the end (held back for a stop string that did not
  // complete, or the tail of an incomplete UTF-8 character as U+FFFD). The
  // full output is the concatenation of every TokenEvent::text and this.
  std::string text;
  Usage usage;
  Timings timings;
  int64_t num_preemptions = 0;  // times the request lost its KV and recomputed
  SpecStats spec;
  // Index of the engine step in which the request first ran (-1: never).
  // Deterministic, unlike timings: tests use it to check scheduling order.
  int64_t first_scheduled_step = -1;
  // Which of the request's parallel samples this stream is (0 .. n-1). The
  // samples share one prompt: usage.prompt_tokens is repeated on each, but
  // metrics count it once (sample 0).
  int sample_index = 0;
  // GenerateRequest::prompt_logprobs >= 0: the log-probability of prompt
  // tokens 1 .. n-1, each given the tokens before it, with its top
  // alternatives ([prompt.size() - 1]; token 0 has no prefix). Carried by
  // the stream's first event: the first TokenEvent, or this final event when
  // the request streams no token (max_tokens 0, or EOS first).
  std::vector<TokenLogprob> prompt_logprobs;
  // GenerateRequest::embedding: the pooled, L2-normalised final hidden
  // state of the prompt ([n_embd]); empty otherwise, and when the request
  // did not complete (cancelled, rejected, failed).
  std::vector<float> embedding;
};

struct StreamEvent {
  std::optional<TokenEvent> token;  // exactly one of token / final is set
  std::optional<FinalEvent> final;
  bool is_final() const { return final.has_value(); }
};

// Where a consumer's requests to the engine go (the engine's inbox): a
// cancel, and backpressure's pause and resume. Thread-safe; called from the
// consumer's thread without the stream's lock.
class RequestControl {
 public:
  virtual ~RequestControl() = default;
  virtual void cancel(RequestId id) = 0;
  virtual void set_paused(RequestId id, bool paused) = 0;
};

// The shared state between the engine (producer) and handles (consumers).
class RequestStream {
 public:
  // `control` hears the first cancel() and every set_paused() before the
  // final event; held weakly, so a stream may outlive its engine (then
  // both are no-ops). Empty: nobody to tell (tests that drive the core).
  explicit RequestStream(RequestId id, std::weak_ptr<RequestControl> control = {});

  RequestId id() const { return id_; }

  // Producer side (engine thread). Nothing may be pushed after push_final.
  void push_token(TokenEvent event);
  void push_final(FinalEvent event);

  // Consumer side. next() blocks until an event arrives or `timeout` passes
  // (nullopt); after the final event has been taken it returns nullopt at once.
  std::optional<StreamEvent> next(std::chrono::milliseconds timeout);
  std::optional<StreamEvent> try_next();

  // True once the final event has been pushed (it may not be consumed yet).
  bool done() const;
  // True once the final event has been taken by a consumer.
  bool drained() const;

  void cancel();
  bool cancel_requested() const;
  // Asks the engine to hold (or resume) the request; see
  // RequestHandle::set_paused. Ignored after the final event.
  void set_paused(bool paused);

 private:
  std::optional<StreamEvent> pop_locked();

  const RequestId id_;
  std::weak_ptr<RequestControl> control_;
  mutable std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<StreamEvent> events_;
  bool final_pushed_ = false;
  bool final_taken_ = false;
  bool cancel_requested_ = false;
};

// Everything a finished stream said, gathered by RequestHandle::wait().
struct GenerationResult {
  std::vector<int32_t> tokens;
  std::string text;                           // every TokenEvent::text, then FinalEvent::text
  std::vector<TokenLogprob> logprobs;         // one per token when asked for
  std::vector<TokenLogprob> prompt_logprobs;  // see FinalEvent::prompt_logprobs
  FinalEvent final;
};

// The client's view of one request. Cheap to copy (a shared pointer); all
// copies see the same stream. A default-constructed handle is empty.
class RequestHandle {
 public:
  RequestHandle() = default;
  explicit RequestHandle(std::shared_ptr<RequestStream> stream) : stream_(std::move(stream)) {}

  bool valid() const { return stream_ != nullptr; }
  RequestId id() const { return stream_->id(); }

  // Blocking pull; nullopt on timeout or after the final event was taken.
  std::optional<StreamEvent> next(std::chrono::milliseconds timeout = std::chrono::hours(24)) {
    return stream_->next(timeout);
  }
  // Non-blocking poll.
  std::optional<StreamEvent> try_next() { return stream_->try_next(); }
  bool done() const { return stream_->done(); }
  bool drained() const { return stream_->drained(); }

  // Asks the engine to stop the request at its next step; its KV blocks are
  // freed and the stream ends with FinishReason::kCancelled (unless it had
  // already finished). Idempotent, thread-safe, returns at once.
  void cancel() { stream_->cancel(); }

  // Backpressure for a consumer that cannot keep up: a paused request keeps
  // its KV blocks and its sequence slot but generates nothing until
  // resumed (the engine may still preempt it under KV pressure; it then
  // recomputes on resume, with the same output). Cancels and timeouts
  // still apply. Thread-safe, returns at once; takes effect at the
  // engine's next step. Per sample for parallel samples.
  void set_paused(bool paused) { stream_->set_paused(paused); }

  // Consumes the rest of the stream, blocking until the final event.
  GenerationResult wait();

 private:
  std::shared_ptr<RequestStream> stream_;
};

}  // namespace tokenmill::engine
