#include "cli/token_clock.h"

#include <optional>

#include "util/error.h"

namespace tokenmill::cli {

TokenClock::TokenClock(engine::RequestHandle h) : handle_(h), thread_([this] { read(); }) {}

TokenClock::~TokenClock() {
  if (thread_.joinable()) thread_.join();
}

size_t TokenClock::count() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return times_.size();
}

std::vector<SteadyClock::time_point> TokenClock::times() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return times_;
}

engine::FinalEvent TokenClock::wait_final() {
  if (thread_.joinable()) thread_.join();
  if (final_.reason != engine::FinishReason::kLength && final_.reason != engine::FinishReason::kStop)
    fail("a request ended with '{}': {}", engine::finish_reason_name(final_.reason), final_.error);
  return final_;
}

void TokenClock::read() {
  while (std::optional<engine::StreamEvent> e = handle_.next()) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (e->final) final_ = *e->final;
    if (e->token) times_.push_back(SteadyClock::now());
  }
}

}  // namespace tokenmill::cli
