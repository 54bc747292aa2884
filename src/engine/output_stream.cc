#include "engine/output_stream.h"

#include "util/check.h"

namespace tokenmill::engine {

RequestStream::RequestStream(RequestId id, std::weak_ptr<RequestControl> control)
    : id_(id), control_(std::move(control)) {}

void RequestStream::push_token(TokenEvent event) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    TM_CHECK_MSG(!final_pushed_, "token pushed after the final event");
    StreamEvent e;
    e.token = std::move(event);
    events_.push_back(std::move(e));
  }
  ready_.notify_all();
}

void RequestStream::push_final(FinalEvent event) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    TM_CHECK_MSG(!final_pushed_, "second final event");
    StreamEvent e;
    e.final = std::move(event);
    events_.push_back(std::move(e));
    final_pushed_ = true;
  }
  ready_.notify_all();
}

std::optional<StreamEvent> RequestStream::pop_locked() {
  if (events_.empty()) return std::nullopt;
  StreamEvent e = std::move(events_.front());
  events_.pop_front();
  if (e.is_final()) final_taken_ = true;
  return e;
}

std::optional<StreamEvent> RequestStream::next(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  ready_.wait_for(lock, timeout, [this] { return !events_.empty() || final_taken_; });
  return pop_locked();
}

std::optional<StreamEvent> RequestStream::try_next() {
  std::lock_guard<std::mutex> lock(mutex_);
  return pop_locked();
}

bool RequestStream::done() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return final_pushed_;
}

bool RequestStream::drained() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return final_taken_;
}

void RequestStream::cancel() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (cancel_requested_ || final_pushed_) return;
    cancel_requested_ = true;
  }
  if (std::shared_ptr<RequestControl> control = control_.lock()) control->cancel(id_);
}

void RequestStream::set_paused(bool paused) {
  if (done()) return;
  if (std::shared_ptr<RequestControl> control = control_.lock()) control->set_paused(id_, paused);
}

bool RequestStream::cancel_requested() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return cancel_requested_;
}

GenerationResult RequestHandle::wait() {
  GenerationResult result;
  while (true) {
    std::optional<StreamEvent> e = stream_->next(std::chrono::hours(24));
    if (!e) {
      TM_CHECK_MSG(!stream_->drained(), "wait() on a stream whose final event was already taken");
      continue;
    }
    if (e->is_final()) {
      if (!e->final->prompt_logprobs.empty()) result.prompt_logprobs = std::move(e->final->prompt_logprobs);
      result.text += e->final->text;
      result.final = std::move(*e->final);
      return result;
    }
    if (!e->token->prompt_logprobs.empty()) result.prompt_logprobs = std::move(e->token->prompt_logprobs);
    result.tokens.push_back(e->token->token);
    result.text += e->token->text;
    if (e->token->logprob) result.logprobs.push_back(std::move(*e->token->logprob));
  }
}

}  // namespace tokenmill::engine
