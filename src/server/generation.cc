#include "server/generation.h"

#include <algorithm>

namespace tokenmill::server {

Generation::Generation(engine::Engine& engine, const std::vector<std::vector<int32_t>>& prompts,
                       const engine::GenerateRequest& base, int n, HttpStats& stats,
                       std::chrono::milliseconds share_wait)
    : n_(std::max(n, 1)), stats_(stats) {
  stats_.add_in_flight(1);
  const size_t per = static_cast<size_t>(n_);
  handles_.resize(prompts.size() * per);
  pending_.resize(handles_.size());
  auto submit = [&](size_t p, int k) {
    engine::GenerateRequest r = base;
    r.prompt = prompts[p];
    r.n = 1;
    r.sampling.seed = base.sampling.seed + static_cast<uint64_t>(k);
    handles_[p * per + static_cast<size_t>(k)] = engine.submit(std::move(r));
  };
  for (size_t p = 0; p < prompts.size(); ++p) submit(p, 0);
  if (n_ == 1) return;
  // The other samples follow once the first has prefilled its prompt (its
  // first event), so that they find the prompt's full blocks in the prefix
  // cache instead of computing them again.
  const auto deadline = std::chrono::steady_clock::now() + share_wait;
  for (size_t p = 0; p < prompts.size(); ++p) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() > 0) pending_[p * per] = handles_[p * per].next(left);
  }
  for (size_t p = 0; p < prompts.size(); ++p)
    for (int k = 1; k < n_; ++k) submit(p, k);
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

void merge(engine::GenerationResult& into, engine::GenerationResult&& rest) {
  into.tokens.insert(into.tokens.end(), rest.tokens.begin(), rest.tokens.end());
  into.text += rest.text;
  into.logprobs.insert(into.logprobs.end(), rest.logprobs.begin(), rest.logprobs.end());
  into.final = std::move(rest.final);
}

}  // namespace

std::vector<engine::GenerationResult> Generation::wait_all() {
  std::vector<engine::GenerationResult> results(handles_.size());
  for (size_t i = 0; i < handles_.size(); ++i) {
    engine::GenerationResult& r = results[i];
    // Replay the event wait_first_events may have taken, then the rest.
    std::optional<engine::StreamEvent> first = take_pending(i);
    if (first && first->final) {
      r.final = std::move(*first->final);
    } else {
      if (first) {
        r.tokens.push_back(first->token->token);
        r.text += first->token->text;
        if (first->token->logprob) r.logprobs.push_back(*first->token->logprob);
      }
      merge(r, handles_[i].wait());
    }
    if (r.final.reason == engine::FinishReason::kRejected) {
      cancel_all();
      throw rejection_error(r.final);
    }
  }
  return results;
}

ApiError rejection_error(const engine::FinalEvent& f) {
  switch (f.reject) {
    case engine::RejectReason::kTooLong:
      return ApiError(400, f.error, "invalid_request_error", "max_tokens", "context_length_exceeded");
    case engine::RejectReason::kOverloaded:
      if (f.error.find("stopped") != std::string::npos)
        return ApiError(503, "the server is shutting down", "service_unavailable", std::nullopt, "shutting_down")
            .with_retry_after(5);
      return ApiError(429, "the server is overloaded: " + f.error + "; retry later", "rate_limit_error", std::nullopt,
                      "overloaded")
          .with_retry_after(1);
    case engine::RejectReason::kInvalid:
    case engine::RejectReason::kNone:
      break;
  }
  return ApiError(400, f.error, "invalid_request_error");
}

std::optional<ApiError> failure_error(const engine::FinalEvent& f) {
  switch (f.reason) {
    case engine::FinishReason::kRejected:
      return rejection_error(f);
    case engine::FinishReason::kError:
      return ApiError(500, "generation failed: " + f.error, "server_error");
    case engine::FinishReason::kCancelled:
      return ApiError(503, "the request was cancelled: " + (f.error.empty() ? std::string("cancelled") : f.error),
                      "service_unavailable", std::nullopt, "cancelled")
          .with_retry_after(5);
    default:
      return std::nullopt;
  }
}

}  // namespace tokenmill::server
