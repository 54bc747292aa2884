#include "server/llamacpp/llamacpp_session.h"

#include <thread>

#include "server/http_types.h"
#include "server/request_log.h"

namespace tokenmill::server {

using nlohmann::json;

namespace {

// How often a waiting whole-body request looks whether its client is still there.
constexpr std::chrono::milliseconds kLlamaAbandonPoll{100};

}  // namespace

LlamaSession::LlamaSession(ServingContext& ctx, engine::Engine& engine, SlotBoard& board, LlamaJob job)
    : ctx_(ctx),
      job_(std::move(job)),
      gen_(engine, job_.prompts, job_.request, job_.n, ctx.stats),
      piece_([tok = ctx.tokenizer](int32_t id) {
        return tok ? tok->token_to_piece(id, /*special=*/true) : "<" + std::to_string(id) + ">";
      }) {
  choices_.resize(gen_.size());
  for (size_t i = 0; i < choices_.size(); ++i) {
    Choice& c = choices_[i];
    c.out.index = static_cast<int>(i);
    c.out.prompt_text = job_.prompt_texts[gen_.prompt_index(i)];
    c.out.result.final.usage.prompt_tokens = static_cast<int64_t>(job_.prompts[gen_.prompt_index(i)].size());
    c.lease =
        board.acquire(i == 0 ? job_.wanted_slot : -1, job_.spec.settings, job_.request.max_tokens, job_.request.tenant);
    c.out.id_slot = c.lease.id();
  }
}

bool LlamaSession::absorb(size_t i, engine::StreamEvent& e) {
  Choice& c = choices_[i];
  engine::GenerationResult& r = c.out.result;
  if (e.final) {
    r.text += e.final->text;
    r.final = std::move(*e.final);
    c.done = true;
    c.lease = SlotBoard::Lease();  // the slot is free again
    return true;
  }
  const engine::TokenEvent& t = *e.token;
  r.tokens.push_back(t.token);
  r.text += t.text;
  if (t.logprob) r.logprobs.push_back(*t.logprob);
  c.lease.on_token(t.text.find('\n') != std::string::npos);
  return false;
}

std::optional<engine::StreamEvent> LlamaSession::next_event(size_t i, std::chrono::milliseconds wait) {
  if (std::optional<engine::StreamEvent> e = gen_.take_pending(i)) return e;
  return wait.count() > 0 ? gen_.handle(i).next(wait) : gen_.handle(i).try_next();
}

std::optional<json> LlamaSession::run_whole(const HttpRequest& req) {
  for (size_t i = 0; i < choices_.size(); ++i) {
    while (!choices_[i].done) {
      if (std::optional<engine::StreamEvent> e = next_event(i, kLlamaAbandonPoll)) {
        // A refused or failed choice answers for the request at once (the
        // others are cancelled when the session ends).
        if (absorb(i, *e))
          if (std::optional<ApiError> err = failure_error(choices_[i].out.result.final)) throw *err;
      } else if (req.client_gone()) {
        cancel_and_collect();
        ctx_.stats.on_disconnect();
        record(/*client_left=*/true);
        return std::nullopt;
      }
    }
  }
  record(false);
  json list = json::array();
  for (const Choice& c : choices_)
    list.push_back(select_response_fields(llama_final_json(job_.spec, c.out, piece_), job_.spec.fields));
  return list.size() == 1 ? list[0] : list;
}

bool LlamaSession::write(ResponseStream& out, const std::string& data) {
  last_write_ = std::chrono::steady_clock::now();
  return out.write(data) && keep_up(out);
}

// Backpressure: while the client has not taken max_unsent_bytes, every
// choice is held in the engine; a client that takes nothing for the
// stalled-client timeout is treated as gone.
bool LlamaSession::keep_up(ResponseStream& out) {
  const size_t bound = ctx_.policy.max_unsent_bytes;
  if (bound == 0 || out.unsent_bytes() <= bound) return true;
  auto pause = [this](bool paused) {
    for (size_t i = 0; i < choices_.size(); ++i)
      if (!choices_[i].done) gen_.handle(i).set_paused(paused);
  };
  pause(true);
  ctx_.stats.on_backpressure_pause();
  const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(ctx_.policy.stalled_client_timeout_s * 1000.0));
  if (!out.wait_unsent_below(bound / 2, timeout)) {
    if (!out.client_gone()) ctx_.stats.on_stalled_client();
    return false;
  }
  pause(false);
  return true;
}

bool LlamaSession::stream_event(ResponseStream& out, size_t i, engine::StreamEvent& e) {
  Choice& c = choices_[i];
  const bool final = absorb(i, e);
  if (!final) {
    const engine::TokenEvent& t = *e.token;  // absorb() copied from it
    const int64_t predicted = static_cast<int64_t>(c.out.result.tokens.size());
    return write(out, sse_event(llama_partial_json(job_.spec, c.out.index, c.out.id_slot, t, predicted,
                                                   c.out.result.final.usage.prompt_tokens, piece_)));
  }
  if (std::optional<ApiError> err = failure_error(c.out.result.final)) {
    // Too late for a status code: the error travels as an event and the
    // other choices stop too.
    failed_ = true;
    gen_.cancel_all();
    return write(out, sse_event(err->to_json()));
  }
  return write(out, sse_event(select_response_fields(llama_final_json(job_.spec, c.out, piece_), job_.spec.fields)));
}

bool LlamaSession::run_stream(ResponseStream& out) {
  last_write_ = std::chrono::steady_clock::now();
  const bool single = choices_.size() == 1;
  bool ok = true;
  while (ok && !failed_) {
    bool all_done = true, progressed = false;
    for (size_t i = 0; i < choices_.size() && ok && !failed_; ++i) {
      if (choices_[i].done) continue;
      all_done = false;
      std::optional<engine::StreamEvent> e = next_event(i, single ? ctx_.keep_alive : std::chrono::milliseconds(0));
      if (!e) continue;
      progressed = true;
      ok = stream_event(out, i, *e);
    }
    if (!ok || all_done) break;
    if (progressed) continue;
    if (std::chrono::steady_clock::now() - last_write_ >= ctx_.keep_alive) {
      ok = write(out, std::string(kSseKeepAlive));
    } else if (!single) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }
  if (!ok) {
    ctx_.stats.on_disconnect();
    cancel_and_collect();
  }
  record(!ok);
  return ok;
}

void LlamaSession::cancel_and_collect() {
  gen_.cancel_all();
  // The engine ends a cancelled request at its next step; waiting for that
  // (briefly) lets the log line carry the real usage.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  for (size_t i = 0; i < choices_.size(); ++i) {
    while (!choices_[i].done && std::chrono::steady_clock::now() < deadline) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      std::optional<engine::StreamEvent> e = next_event(i, std::max(left, std::chrono::milliseconds(1)));
      if (e) absorb(i, *e);
    }
  }
}

void LlamaSession::record(bool client_left) const {
  RequestRecord& r = current_record();
  r.model = job_.spec.model;
  r.stream = job_.spec.stream;
  r.num_choices = static_cast<int>(choices_.size());
  r.client_disconnected = client_left;
  for (size_t i = 0; i < choices_.size(); ++i) {
    const engine::FinalEvent& f = choices_[i].out.result.final;
    if (i % static_cast<size_t>(job_.n) == 0) {  // a prompt counts once, whatever n is
      r.prompt_tokens += f.usage.prompt_tokens;
      r.cached_tokens += f.usage.cached_prompt_tokens;
    }
    r.completion_tokens += f.usage.completion_tokens;
  }
  if (choices_.empty() || !choices_[0].done) return;
  const engine::FinalEvent& f = choices_[0].out.result.final;
  r.finish_reason = finish_reason_text(f.reason);
  r.queue_ms = f.timings.queue_ms;
  r.ttft_ms = f.timings.ttft_ms;
  r.e2e_ms = f.timings.e2e_ms;
}

}  // namespace tokenmill::server
