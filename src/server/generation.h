// One API request's engine requests: every prompt times n parallel samples
// (choice index = prompt_index * n + sample). Each prompt is one engine
// request with n samples (Engine::submit_samples): its prompt is prefilled
// once and the scheduler forks it into n sequences sharing the prompt's KV
// blocks copy-on-write.
//
// Also maps how a request ended to its HTTP answer (rejections -> 400/429/
// 503 ApiErrors).
//
// Thread-safety: a Generation belongs to the HTTP worker thread that
// answers the request; the engine pushes into its streams from its thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <vector>

#include "engine/engine.h"
#include "server/api_error.h"
#include "server/http_types.h"
#include "server/sampling_request.h"

namespace tokenmill::server {

class Generation {
 public:
  // Submits one request per prompt built from `base` (its prompt and n are
  // replaced), each with n samples. Sample k of a prompt uses seed
  // base.sampling.seed + k (the engine's rule) so that parallel samples
  // differ but stay reproducible.
  Generation(engine::Engine& engine, const std::vector<std::vector<int32_t>>& prompts,
             const engine::GenerateRequest& base, int n, HttpStats& stats);
  // Cancels every request that has not finished (a client that left, an
  // error on another choice).
  ~Generation();
  Generation(const Generation&) = delete;
  Generation& operator=(const Generation&) = delete;

  size_t size() const { return handles_.size(); }
  size_t prompt_index(size_t choice) const { return choice / static_cast<size_t>(n_); }
  engine::RequestHandle& handle(size_t choice) { return handles_[choice]; }

  // Waits (until `deadline`) for the first event of every choice and keeps
  // it for take_pending(). Throws the ApiError of the first choice the
  // engine refused, cancelling the others: this is what decides the HTTP
  // status before any byte of the response is sent.
  void wait_first_events(std::chrono::steady_clock::time_point deadline);
  // The event held by wait_first_events for a choice, if any (once).
  std::optional<engine::StreamEvent> take_pending(size_t choice);

  // Blocks until every choice has finished. The results are in choice
  // order. Throws the ApiError of the first choice that failed (refused,
  // error, cancelled by a shutdown: failure_error), cancelling the others.
  // `abandoned` is asked every 100 ms while waiting: once true (the client
  // left), every choice is cancelled and their final events collected (no
  // throw then). `observe` sees each event before it is added (choice
  // index, event), e.g. to show progress.
  using EventObserver = std::function<void(size_t, const engine::StreamEvent&)>;
  std::vector<engine::GenerationResult> wait_all(const std::function<bool()>& abandoned = {},
                                                 const EventObserver& observe = {});

  void cancel_all();

 private:
  std::vector<engine::RequestHandle> handles_;
  std::vector<std::optional<engine::StreamEvent>> pending_;
  int n_ = 1;
  HttpStats& stats_;
};

// The ApiError for a request the engine refused (FinishReason::kRejected),
// one per RejectReason (docs/api.md, Errors): invalid -> 400; prompt too
// long / context exceeded -> 400 context_length_exceeded (param
// `prompt_param` / "max_tokens"); KV pool too small -> 400
// kv_cache_too_small; queue full / KV exhausted -> 429 with Retry-After;
// deadline expired in the queue / shutting down -> 503 with Retry-After;
// SLO unattainable -> 503 slo_unattainable with the engine's Retry-After
// estimate.
ApiError rejection_error(const engine::FinalEvent& final, const std::string& prompt_param = "prompt");

// For a final event that is not a normal end: rejected (see above), error
// -> 500, cancelled by a shutdown -> 503. nullopt for stop / length /
// timeout (a timeout is reported as the finish reason "timeout").
std::optional<ApiError> failure_error(const engine::FinalEvent& final, const std::string& prompt_param = "prompt");

// How a choice ended, as every API names it: "stop", "length"; engine-side ends outside OpenAI's set keep their own
// names: "cancelled", "timeout", "error".
std::string finish_reason_text(engine::FinishReason reason);

// Each choice's final event, in choice order.
std::vector<engine::FinalEvent> finals_of(const std::vector<engine::GenerationResult>& results);

// What a request's choices used, summed: a prompt counts once whatever n
// is (as OpenAI counts it), every choice's completion tokens count.
engine::Usage total_usage(std::span<const engine::FinalEvent> finals, int n);

// Fills the request's log record from its choices' final events: usage,
// number of choices, and the finish reason and timings of choice 0 (when
// `first_done`).
void record_outcome(std::span<const engine::FinalEvent> finals, int n, bool first_done = true);

// The engine request of one prompt-less generation request: the parsed
// sampling fields, a random seed unless the client gave one, the deadline,
// the logprob settings and the compiled constraint. The caller fills in the
// prompt (and n). prompt_logprobs: -1 = off.
engine::GenerateRequest engine_request(const SamplingRequest& c, const std::string& tenant, int64_t max_tokens,
                                       int prompt_logprobs, std::shared_ptr<const grammar::CompiledGrammar> grammar);

}  // namespace tokenmill::server
