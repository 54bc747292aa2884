#include "server/generation_stream.h"

#include <thread>

#include "server/serving_context.h"

namespace tokenmill::server {

StreamLimits stream_limits(const ServingContext& ctx) {
  StreamLimits l;
  l.keep_alive = ctx.keep_alive;
  l.max_unsent_bytes = ctx.policy.max_unsent_bytes;
  l.stalled_client_timeout =
      std::chrono::milliseconds(static_cast<int64_t>(ctx.policy.stalled_client_timeout_s * 1000.0));
  return l;
}

GenerationStream::GenerationStream(std::unique_ptr<Generation> gen, int n,
                                   std::span<const std::vector<int32_t>> prompts, StreamShape& shape,
                                   StreamLimits limits, HttpStats& stats)
    : gen_(std::move(gen)), n_(std::max(n, 1)), shape_(shape), limits_(limits), stats_(stats) {
  choices_.resize(prompts.size() * static_cast<size_t>(n_));
  for (size_t i = 0; i < choices_.size(); ++i)
    choices_[i].final.usage.prompt_tokens = static_cast<int64_t>(prompts[i / static_cast<size_t>(n_)].size());
}

bool GenerationStream::write(ResponseStream& out, const std::string& data) {
  if (data.empty()) return true;
  last_write_ = std::chrono::steady_clock::now();
  return out.write(data) && apply_backpressure(out);
}

void GenerationStream::set_paused(bool paused) {
  if (!gen_) return;
  for (size_t i = 0; i < choices_.size(); ++i)
    if (!choices_[i].done) gen_->handle(i).set_paused(paused);
}

bool GenerationStream::apply_backpressure(ResponseStream& out) {
  if (limits_.max_unsent_bytes == 0 || out.unsent_bytes() <= limits_.max_unsent_bytes) return true;
  set_paused(true);
  stats_.on_backpressure_pause();
  if (!out.wait_unsent_below(limits_.max_unsent_bytes / 2, limits_.stalled_client_timeout)) {
    stalled_ = !out.client_gone();
    if (stalled_) stats_.on_stalled_client();
    return false;  // run() cancels every choice
  }
  set_paused(false);
  return true;
}

bool GenerationStream::on_event(ResponseStream& out, size_t i, engine::StreamEvent& e) {
  if (e.token) return write(out, shape_.on_token(i, *e.token));
  Choice& c = choices_[i];
  c.done = true;
  c.final = std::move(*e.final);
  // A cancelled choice (a shutdown's abort) still ends normally, with its
  // finish reason: only a refusal or a failure is an error event.
  const bool failed =
      c.final.reason == engine::FinishReason::kRejected || c.final.reason == engine::FinishReason::kError;
  if (std::optional<ApiError> error = failed ? failure_error(c.final) : std::nullopt) {
    // Too late for a status code: the error travels as an event, and the
    // other choices stop too.
    failed_ = true;
    if (gen_) gen_->cancel_all();
    return write(out, shape_.on_failure(*error));
  }
  return write(out, shape_.on_final(i, c.final));
}

std::optional<engine::StreamEvent> GenerationStream::poll(size_t i, bool block) {
  if (std::optional<engine::StreamEvent> e = gen_->take_pending(i)) return e;
  return block ? gen_->handle(i).next(limits_.keep_alive) : gen_->handle(i).try_next();
}

bool GenerationStream::poll_choices(ResponseStream& out, bool& all_done, bool& progressed) {
  // One choice: wait on it (up to the keep-alive); several: look at each.
  const bool block = choices_.size() == 1;
  for (size_t i = 0; i < choices_.size() && !failed_; ++i) {
    if (choices_[i].done) continue;
    std::optional<engine::StreamEvent> e;
    if (gen_) {
      all_done = false;
      e = poll(i, block);
    } else {  // nothing to generate: max_tokens 0 with echo
      e.emplace();
      e->final = choices_[i].final;
      e->final->reason = engine::FinishReason::kLength;
    }
    if (!e) continue;
    progressed = true;
    if (!on_event(out, i, *e)) return false;
  }
  return true;
}

bool GenerationStream::run(ResponseStream& out) {
  last_write_ = std::chrono::steady_clock::now();
  bool ok = write(out, shape_.preamble());
  while (ok && !failed_) {
    bool all_done = true, progressed = false;
    ok = poll_choices(out, all_done, progressed);
    if (!ok || all_done || failed_) break;
    if (progressed) continue;
    if (std::chrono::steady_clock::now() - last_write_ >= limits_.keep_alive) {
      ok = write(out, std::string(kSseKeepAlive));
    } else if (choices_.size() > 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }
  if (ok) ok = write(out, shape_.epilogue(finals(), failed_));
  if (!ok) {
    stats_.on_disconnect();
    collect_after_cancel();
  }
  record_outcome(finals(), n_, !choices_.empty() && choices_[0].done);
  RequestRecord& r = current_record();
  r.client_disconnected = !ok;
  if (stalled_) r.error = "the client stopped reading the stream (stalled-client timeout)";
  return ok;
}

std::vector<engine::FinalEvent> GenerationStream::finals() const {
  std::vector<engine::FinalEvent> out;
  for (const Choice& c : choices_) out.push_back(c.final);
  return out;
}

void GenerationStream::collect_after_cancel() {
  if (!gen_) return;
  gen_->cancel_all();
  // The engine ends a cancelled request at its next step; waiting for that
  // (briefly) lets the log line carry the real usage and finish reason.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  for (size_t i = 0; i < choices_.size(); ++i) {
    while (!choices_[i].done && std::chrono::steady_clock::now() < deadline) {
      std::optional<engine::StreamEvent> e = gen_->take_pending(i);
      if (!e)
        e = gen_->handle(i).next(
            std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()));
      if (e && e->final) {
        choices_[i].done = true;
        choices_[i].final = std::move(*e->final);
      }
    }
  }
}

}  // namespace tokenmill::server
