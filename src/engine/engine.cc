#include "engine/engine.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>

#include "engine/slo_calibration.h"

namespace tokenmill::engine {

void Engine::Inbox::cancel(RequestId id) {
  {
    std::lock_guard<std::mutex> lock(mutex);
    cancels.push_back(id);
  }
  wake.notify_one();
}

void Engine::Inbox::set_paused(RequestId id, bool paused) {
  {
    std::lock_guard<std::mutex> lock(mutex);
    pauses.emplace_back(id, paused);
  }
  wake.notify_one();
}

Engine::Engine(const EngineConfig& config)
    : core_(std::make_unique<EngineCore>(config, metrics_)), inbox_(std::make_shared<Inbox>()) {
  thread_ = std::thread([this] { loop(); });
  if (config.slo.enabled() && config.slo_calibration) {
    try {
      calibrate_slo_costs(*this);
    } catch (...) {
      stop(StopMode::kAbort);
      throw;
    }
    // Clients see their own requests only; the step-cost model keeps what
    // it learned.
    metrics_.reset_counts();
  }
}

Engine::~Engine() { stop(StopMode::kAbort); }

void Engine::reject(RequestStream& stream, RejectReason reason, std::string message) {
  FinalEvent f;
  f.reason = FinishReason::kRejected;
  f.reject = reason;
  f.error = std::move(message);
  metrics_.on_reject(reason);
  metrics_.on_finish(f);
  stream.push_final(std::move(f));
}

std::shared_ptr<RequestStream> Engine::new_stream() {
  const RequestId id = next_id_.fetch_add(1);
  return std::make_shared<RequestStream>(id, std::weak_ptr<RequestControl>(inbox_));
}

RequestHandle Engine::submit(GenerateRequest request) {
  if (request.n == 1) return submit_samples(std::move(request))[0];
  std::shared_ptr<RequestStream> stream = new_stream();
  metrics_.on_submit();
  reject(*stream, RejectReason::kInvalid,
         fmt::format("n = {}: submit() takes one sample; use submit_samples", request.n));
  return RequestHandle(stream);
}

std::vector<RequestHandle> Engine::submit_samples(GenerateRequest request) {
  const SteadyClock::time_point now = SteadyClock::now();
  const size_t n = static_cast<size_t>(std::clamp(request.n, 1, kMaxSamples));
  std::vector<std::shared_ptr<RequestStream>> streams;
  std::vector<RequestHandle> handles;
  for (size_t k = 0; k < n; ++k) {
    streams.push_back(new_stream());
    handles.emplace_back(streams.back());
    metrics_.on_submit();
  }
  std::optional<Refusal> refusal = check_request(request, core_->limits());
  if (!refusal) {
    std::unique_lock<std::mutex> lock(inbox_->mutex);
    if (inbox_->stopping) {
      refusal = Refusal{RejectReason::kShuttingDown, "the engine is shutting down and takes no new requests"};
    } else {
      inbox_->submissions.push_back({std::move(streams), std::move(request), now});
    }
  }
  if (refusal) {
    for (const std::shared_ptr<RequestStream>& s : streams) reject(*s, refusal->reason, refusal->message);
    return handles;
  }
  inbox_->wake.notify_one();
  return handles;
}

void Engine::cancel(RequestId id) { inbox_->cancel(id); }

void Engine::set_paused(RequestId id, bool paused) { inbox_->set_paused(id, paused); }

void Engine::pause() {
  std::unique_lock<std::mutex> lock(inbox_->mutex);
  inbox_->paused = true;
  inbox_->wake.notify_one();
  inbox_->parked.wait(lock, [&] { return inbox_->is_parked || inbox_->stopping; });
}

void Engine::resume() {
  {
    std::lock_guard<std::mutex> lock(inbox_->mutex);
    inbox_->paused = false;
  }
  inbox_->wake.notify_one();
}

void Engine::stop(StopMode mode) {
  std::lock_guard<std::mutex> serial(stop_mutex_);
  {
    std::lock_guard<std::mutex> lock(inbox_->mutex);
    if (!inbox_->stopping) {
      inbox_->stopping = true;
      inbox_->stop_mode = mode;
    }
    inbox_->paused = false;
  }
  inbox_->wake.notify_one();
  inbox_->parked.notify_all();
  if (thread_.joinable()) thread_.join();
}

// Waits until the engine thread has something to do: inbox items, work
// (after a 1 ms back-off when the last step made no progress), or a stop.
// Parks while paused. Called with the inbox lock held.
void Engine::wait_for_work(std::unique_lock<std::mutex>& lock, bool backoff) {
  Inbox& in = *inbox_;
  while (true) {
    if (in.stopping) {
      if (backoff) in.wake.wait_for(lock, std::chrono::milliseconds(1));
      return;
    }
    if (in.paused) {
      in.is_parked = true;
      in.parked.notify_all();
      in.wake.wait(lock);
      continue;
    }
    in.is_parked = false;
    if (!in.submissions.empty() || !in.cancels.empty() || !in.pauses.empty()) return;
    if (core_->has_work()) {
      if (!backoff) return;
      in.wake.wait_for(lock, std::chrono::milliseconds(1));
      backoff = false;
      continue;
    }
    in.wake.wait(lock);
  }
}

// The engine thread. Takes the inbox under the lock, then works without it.
void Engine::loop() {
  bool backoff = false;
  while (true) {
    std::vector<Inbox::Submission> submissions;
    std::vector<RequestId> cancels;
    std::vector<std::pair<RequestId, bool>> pauses;
    bool stopping = false;
    StopMode mode = StopMode::kAbort;
    {
      std::unique_lock<std::mutex> lock(inbox_->mutex);
      wait_for_work(lock, backoff);
      inbox_->is_parked = false;
      submissions.swap(inbox_->submissions);
      cancels.swap(inbox_->cancels);
      pauses.swap(inbox_->pauses);
      stopping = inbox_->stopping;
      mode = inbox_->stop_mode;
    }
    for (Inbox::Submission& s : submissions) core_->add(std::move(s.streams), s.request, s.submitted);
    for (const auto& [id, paused] : pauses) core_->set_paused(id, paused);
    for (RequestId id : cancels) core_->cancel(id);
    if (stopping && mode == StopMode::kDrain) core_->resume_all();  // a paused request must not hold the drain
    if (stopping && mode == StopMode::kAbort) {
      core_->abort_all(FinishReason::kCancelled, "the engine is shutting down");
      return;
    }
    if (!core_->has_work()) {
      if (stopping) return;
      backoff = false;
      continue;
    }
    try {
      backoff = !core_->step();
    } catch (const std::exception& e) {
      // Not expected (bad input is refused at submit, a failed forward pass
      // ends only its batch); end everything rather than the process.
      core_->abort_all(FinishReason::kError, std::string("engine step failed: ") + e.what());
    }
  }
}

}  // namespace tokenmill::engine
