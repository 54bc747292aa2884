#include "server/generation.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>

#include "server/request_log.h"
#include "server/serving_context.h"

namespace tokenmill::server {

Generation::Generation(engine::Engine& engine, const std::vector<std::vector<int32_t>>& prompts,
                       const engine::GenerateRequest& base, int n, HttpStats& stats)
    : n_(std::max(n, 1)), stats_(stats) {
  stats_.add_in_flight(1);
  for (const std::vector<int32_t>& prompt : prompts) {
    engine::GenerateRequest r = base;
    r.prompt = prompt;
    r.n = n_;
    for (engine::RequestHandle& h : engine.submit_samples(std::move(r))) handles_.push_back(std::move(h));
  }
  pending_.resize(handles_.size());
}

Generation::~Generation() {
  cancel_all();
  stats_.add_in_flight(-1);
}

void Generation::cancel_all() {
  for (engine::RequestHandle& h : handles_)
    if (!h.drained()) h.cancel();
}

void Generation::wait_first_events(std::chrono::steady_clock::time_point deadline) {
  for (size_t i = 0; i < handles_.size(); ++i) {
    if (!pending_[i]) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      pending_[i] = left.count() > 0 ? handles_[i].next(left) : handles_[i].try_next();
    }
    if (pending_[i] && pending_[i]->final && pending_[i]->final->reason == engine::FinishReason::kRejected) {
      cancel_all();
      throw rejection_error(*pending_[i]->final);
    }
  }
}

std::optional<engine::StreamEvent> Generation::take_pending(size_t choice) {
  std::optional<engine::StreamEvent> e = std::move(pending_[choice]);
  pending_[choice].reset();
  return e;
}

namespace {

// Adds one event to what a choice said; true for its final event.
bool absorb(engine::GenerationResult& r, engine::StreamEvent&& e) {
  if (e.final) {
    if (!e.final->prompt_logprobs.empty()) r.prompt_logprobs = std::move(e.final->prompt_logprobs);
    r.text += e.final->text;
    r.final = std::move(*e.final);
    return true;
  }
  if (!e.token->prompt_logprobs.empty()) r.prompt_logprobs = std::move(e.token->prompt_logprobs);
  r.tokens.push_back(e.token->token);
  r.text += e.token->text;
  if (e.token->logprob) r.logprobs.push_back(std::move(*e.token->logprob));
  return false;
}

// How often a waiting request looks whether its client is still there.
constexpr std::chrono::milliseconds kAbandonPoll{100};

}  // namespace

std::vector<engine::GenerationResult> Generation::wait_all(const std::function<bool()>& abandoned,
                                                           const EventObserver& observe) {
  std::vector<engine::GenerationResult> results(handles_.size());
  bool cancelled = false;
  for (size_t i = 0; i < handles_.size(); ++i) {
    engine::GenerationResult& r = results[i];
    // The event wait_first_events may have taken comes first.
    bool done = false;
    auto take = [&](engine::StreamEvent&& e) {
      if (observe) observe(i, e);
      done = absorb(r, std::move(e));
    };
    if (std::optional<engine::StreamEvent> first = take_pending(i)) take(std::move(*first));
    auto next_look = std::chrono::steady_clock::now() + kAbandonPoll;
    while (!done) {
      if (std::optional<engine::StreamEvent> e = handles_[i].next(kAbandonPoll)) take(std::move(*e));
      if (done || cancelled || !abandoned || std::chrono::steady_clock::now() < next_look) continue;
      next_look = std::chrono::steady_clock::now() + kAbandonPoll;
      if (abandoned()) {
        // Nobody waits for the answer: free the sequences' KV blocks now
        // rather than when the whole generation would have ended.
        cancel_all();
        cancelled = true;
      }
    }
    if (cancelled) continue;  // the client left: nobody reads an error
    if (std::optional<ApiError> error = failure_error(r.final)) {
      cancel_all();
      throw *error;
    }
  }
  return results;
}

std::string finish_reason_text(engine::FinishReason reason) {
  switch (reason) {
    case engine::FinishReason::kStop: return "stop";
    case engine::FinishReason::kLength: return "length";
    case engine::FinishReason::kCancelled: return "cancelled";
    case engine::FinishReason::kTimeout: return "timeout";
    case engine::FinishReason::kRejected: return "rejected";
    case engine::FinishReason::kNone:  // never in a final event
    case engine::FinishReason::kError: return "error";
  }
  return "error";
}

std::vector<engine::FinalEvent> finals_of(const std::vector<engine::GenerationResult>& results) {
  std::vector<engine::FinalEvent> finals;
  for (const engine::GenerationResult& r : results) finals.push_back(r.final);
  return finals;
}

engine::Usage total_usage(std::span<const engine::FinalEvent> finals, int n) {
  engine::Usage total;
  for (size_t i = 0; i < finals.size(); ++i) {
    const engine::Usage& u = finals[i].usage;
    if (i % static_cast<size_t>(std::max(n, 1)) == 0) {
      total.prompt_tokens += u.prompt_tokens;
      total.cached_prompt_tokens += u.cached_prompt_tokens;
    }
    total.completion_tokens += u.completion_tokens;
  }
  return total;
}

void record_outcome(std::span<const engine::FinalEvent> finals, int n, bool first_done) {
  RequestRecord& r = current_record();
  const engine::Usage u = total_usage(finals, n);
  r.num_choices = static_cast<int>(finals.size());
  r.prompt_tokens = u.prompt_tokens;
  r.completion_tokens = u.completion_tokens;
  r.cached_tokens = u.cached_prompt_tokens;
  if (finals.empty() || !first_done) return;
  const engine::FinalEvent& f = finals[0];
  r.finish_reason = finish_reason_text(f.reason);
  r.queue_ms = f.timings.queue_ms;
  r.ttft_ms = f.timings.ttft_ms;
  r.e2e_ms = f.timings.e2e_ms;
}

ApiError rejection_error(const engine::FinalEvent& f, const std::string& prompt_param) {
  using engine::RejectReason;
  switch (f.reject) {
    case RejectReason::kPromptTooLong:
      return ApiError(400, f.error, "invalid_request_error", prompt_param, "context_length_exceeded");
    case RejectReason::kContextExceeded:
      return ApiError(400, f.error, "invalid_request_error", "max_tokens", "context_length_exceeded");
    case RejectReason::kKvNeverFits:
      return ApiError(400, f.error + "; lower max_tokens or shorten the prompt", "invalid_request_error", "max_tokens",
                      "kv_cache_too_small");
    case RejectReason::kQueueFull:
      return ApiError(429, "the server is overloaded: " + f.error + "; retry later", "rate_limit_error", std::nullopt,
                      "queue_full")
          .with_retry_after(1);
    case RejectReason::kKvExhausted:
      return ApiError(429, "the server is overloaded: " + f.error + "; retry later", "rate_limit_error", std::nullopt,
                      "kv_cache_exhausted")
          .with_retry_after(1);
    case RejectReason::kDeadlineExpired:
      return ApiError(503, "the server is overloaded: " + f.error + "; retry later", "service_unavailable",
                      std::nullopt, "deadline_expired")
          .with_retry_after(1);
    case RejectReason::kSloUnattainable:
      return ApiError(503, "the server is overloaded: " + f.error + "; retry later", "service_unavailable",
                      std::nullopt, "slo_unattainable")
          .with_retry_after(static_cast<int>(std::max(1.0, std::ceil(f.retry_after_s))));
    case RejectReason::kShuttingDown:
      return ApiError(503, "the server is shutting down", "service_unavailable", std::nullopt, "shutting_down")
          .with_retry_after(5);
    case RejectReason::kInvalid:
    case RejectReason::kNone: break;
  }
  return ApiError(400, f.error, "invalid_request_error");
}

std::optional<ApiError> failure_error(const engine::FinalEvent& f, const std::string& prompt_param) {
  switch (f.reason) {
    case engine::FinishReason::kRejected: return rejection_error(f, prompt_param);
    case engine::FinishReason::kError: return ApiError(500, "generation failed: " + f.error, "server_error");
    case engine::FinishReason::kCancelled:
      return ApiError(503, "the request was cancelled: " + (f.error.empty() ? std::string("cancelled") : f.error),
                      "service_unavailable", std::nullopt, "cancelled")
          .with_retry_after(5);
    default: return std::nullopt;
  }
}

engine::GenerateRequest engine_request(const SamplingRequest& c, const std::string& tenant, int64_t max_tokens,
                                       int prompt_logprobs, std::shared_ptr<const grammar::CompiledGrammar> grammar) {
  engine::GenerateRequest r;
  r.grammar = std::move(grammar);
  r.prompt_logprobs = prompt_logprobs;
  r.sampling = c.sampling;
  if (!c.seed_given) r.sampling.seed = random_seed();
  r.max_tokens = max_tokens;
  r.priority = c.priority;
  r.spec_max_draft = c.spec_max_draft;
  r.kv_policy = c.kv_policy;
  r.tenant = tenant;
  if (c.timeout_s) r.timeout = std::chrono::milliseconds(static_cast<int64_t>(*c.timeout_s * 1000.0));
  r.logprobs = c.logprobs;
  r.top_logprobs = c.top_logprobs;
  return r;
}

}  // namespace tokenmill::server
