#include "server/stream_session.h"

#include <thread>

#include "server/http_types.h"
#include "server/serving_context.h"

namespace tokenmill::server {

using nlohmann::json;

StreamSession::StreamSession(std::unique_ptr<Generation> gen, StreamSpec spec, TokenPieceFn piece, HttpStats& stats)
    : gen_(std::move(gen)), spec_(std::move(spec)), piece_(std::move(piece)), stats_(stats) {
  const size_t num_prompts = spec_.prompt_tokens.size();
  choices_.resize(num_prompts * static_cast<size_t>(spec_.n));
  for (size_t i = 0; i < choices_.size(); ++i) {
    const size_t p = i / static_cast<size_t>(spec_.n);
    if (p < spec_.echo_texts.size()) choices_[i].offset = static_cast<int64_t>(spec_.echo_texts[p].size());
    choices_[i].final.usage.prompt_tokens = spec_.prompt_tokens[p];
  }
}

bool StreamSession::write(ResponseStream& out, const std::string& data) {
  last_write_ = std::chrono::steady_clock::now();
  return out.write(data) && apply_backpressure(out);
}

void StreamSession::set_paused(bool paused) {
  if (!gen_) return;
  for (size_t i = 0; i < choices_.size(); ++i)
    if (!choices_[i].done) gen_->handle(i).set_paused(paused);
}

bool StreamSession::apply_backpressure(ResponseStream& out) {
  if (spec_.max_unsent_bytes == 0 || out.unsent_bytes() <= spec_.max_unsent_bytes) return true;
  set_paused(true);
  stats_.on_backpressure_pause();
  if (!out.wait_unsent_below(spec_.max_unsent_bytes / 2, spec_.stalled_client_timeout)) {
    stalled_ = !out.client_gone();
    if (stalled_) stats_.on_stalled_client();
    return false;  // run() cancels every choice
  }
  set_paused(false);
  return true;
}

json StreamSession::chat_delta(size_t i, const std::string& text, bool last) {
  if (!spec_.tool_calls) {
    json delta = json::object();
    if (!text.empty()) delta["content"] = text;
    return delta;
  }
  Choice& c = choices_[i];
  ParsedOutput piece = c.parser.feed(text);
  if (last) piece.append(c.parser.finish());
  while (c.call_ids.size() < static_cast<size_t>(c.parser.num_calls())) c.call_ids.push_back(new_response_id("call_"));
  return tool_delta_json(piece, c.call_ids);
}

json StreamSession::chunk(size_t i, const std::string& text, const json& logprobs,
                          const std::optional<std::string>& finish, bool last) {
  const int index = static_cast<int>(i);
  if (spec_.kind == ApiKind::kCompletion)
    return completion_chunk(spec_.meta, index, text, logprobs, finish, spec_.include_usage);
  return chat_chunk(spec_.meta, index, chat_delta(i, text, last), logprobs, finish, spec_.include_usage);
}

bool StreamSession::write_preamble(ResponseStream& out) {
  for (size_t i = 0; i < choices_.size(); ++i) {
    const size_t p = i / static_cast<size_t>(spec_.n);
    if (spec_.kind == ApiKind::kChat) {
      const json delta = {{"role", "assistant"}, {"content", ""}};
      if (!write(out, sse_event(chat_chunk(spec_.meta, static_cast<int>(i), delta, nullptr, std::nullopt,
                                           spec_.include_usage))))
        return false;
    } else if (p < spec_.echo_texts.size() && !spec_.echo_texts[p].empty() && spec_.echo_prompts.empty()) {
      if (!write(out, sse_event(chunk(i, spec_.echo_texts[p], nullptr, std::nullopt)))) return false;
    }
  }
  return true;
}

bool StreamSession::on_token(ResponseStream& out, size_t i, const engine::TokenEvent& t) {
  json logprobs = nullptr;
  if (spec_.logprobs && t.logprob) {
    const std::vector<int32_t> ids = {t.token};
    const std::vector<engine::TokenLogprob> lps = {*t.logprob};
    logprobs = spec_.kind == ApiKind::kCompletion ? completion_logprobs_json(ids, lps, choices_[i].offset, piece_)
                                                  : chat_logprobs_json(ids, lps, piece_);
    choices_[i].offset += static_cast<int64_t>(piece_(t.token).size());
  }
  // Text held back for a possible stop string (or a possible tool call)
  // arrives later; an empty chunk would carry nothing.
  if (t.text.empty() && logprobs.is_null()) return true;
  const json c = chunk(i, t.text, logprobs, std::nullopt);
  const json& choice = c["choices"][0];
  const bool empty = spec_.kind == ApiKind::kChat ? choice["delta"].empty() : t.text.empty();
  if (empty && logprobs.is_null()) return true;
  return write(out, sse_event(c));
}

bool StreamSession::on_final(ResponseStream& out, size_t i, const engine::FinalEvent& f) {
  Choice& c = choices_[i];
  c.done = true;
  c.final = f;
  if (f.reason == engine::FinishReason::kRejected || f.reason == engine::FinishReason::kError) {
    // Too late for a status code: the error travels as an event, and the
    // other choices stop too.
    failed_ = true;
    if (gen_) gen_->cancel_all();
    return write(out, sse_event(failure_error(f)->to_json()));
  }
  json last = chunk(i, f.text, nullptr, finish_reason_text(f.reason), /*last=*/true);
  if (spec_.tool_calls && c.parser.num_calls() > 0 && f.reason == engine::FinishReason::kStop)
    last["choices"][0]["finish_reason"] = "tool_calls";
  last["timings"] = timings_json(f.timings, f.usage, f.spec);  // extension: per choice, as it ends
  return write(out, sse_event(last));
}

// The echo chunk of a choice whose prompt is scored: its text and the
// prompt tokens' logprobs, sent once the first event brought them.
bool StreamSession::write_scored_echo(ResponseStream& out, size_t i, const engine::StreamEvent& e) {
  Choice& c = choices_[i];
  c.echoed = true;
  if (e.final &&
      (e.final->reason == engine::FinishReason::kRejected || e.final->reason == engine::FinishReason::kError))
    return true;  // on_final reports the failure
  const size_t p = i / static_cast<size_t>(spec_.n);
  const std::vector<engine::TokenLogprob>& lps = e.token ? e.token->prompt_logprobs : e.final->prompt_logprobs;
  const json logprobs = prompt_logprobs_json(spec_.echo_prompts[p], lps, piece_);
  c.offset = pieces_size(spec_.echo_prompts[p], piece_);
  return write(out,
               sse_event(chunk(i, p < spec_.echo_texts.size() ? spec_.echo_texts[p] : "", logprobs, std::nullopt)));
}

bool StreamSession::on_event(ResponseStream& out, size_t i, engine::StreamEvent& e) {
  if (!spec_.echo_prompts.empty() && !choices_[i].echoed && !write_scored_echo(out, i, e)) return false;
  if (e.token) return on_token(out, i, *e.token);
  return on_final(out, i, *e.final);
}

std::optional<engine::StreamEvent> StreamSession::poll(size_t i, bool block) {
  if (std::optional<engine::StreamEvent> e = gen_->take_pending(i)) return e;
  return block ? gen_->handle(i).next(spec_.keep_alive) : gen_->handle(i).try_next();
}

bool StreamSession::run(ResponseStream& out) {
  last_write_ = std::chrono::steady_clock::now();
  bool ok = write_preamble(out);
  const bool single = choices_.size() == 1;
  while (ok) {
    bool all_done = true, progressed = false;
    for (size_t i = 0; i < choices_.size() && ok; ++i) {
      if (choices_[i].done) continue;
      if (!gen_) {  // nothing to generate: max_tokens 0 with echo
        engine::FinalEvent f = choices_[i].final;
        f.reason = engine::FinishReason::kLength;
        ok = on_final(out, i, f);
        continue;
      }
      all_done = false;
      std::optional<engine::StreamEvent> e = poll(i, single);
      if (!e) continue;
      progressed = true;
      ok = on_event(out, i, *e);
    }
    if (!ok || all_done || failed_) break;
    if (!progressed) {
      if (std::chrono::steady_clock::now() - last_write_ >= spec_.keep_alive) {
        ok = write(out, std::string(kSseKeepAlive));
      } else if (!single) {
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
    }
  }
  if (ok) ok = finish(out);
  if (!ok) {
    stats_.on_disconnect();
    collect_after_cancel();
  }
  RequestRecord& r = current_record();
  record(r);
  r.client_disconnected = !ok;
  if (stalled_) r.error = "the client stopped reading the stream (stalled-client timeout)";
  return ok;
}

void StreamSession::collect_after_cancel() {
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

bool StreamSession::finish(ResponseStream& out) {
  if (spec_.include_usage && !failed_) {
    engine::Usage total;
    for (size_t i = 0; i < choices_.size(); ++i) {
      const engine::Usage& u = choices_[i].final.usage;
      if (i % static_cast<size_t>(spec_.n) == 0) {  // a prompt counts once, as OpenAI counts it
        total.prompt_tokens += u.prompt_tokens;
        total.cached_prompt_tokens += u.cached_prompt_tokens;
      }
      total.completion_tokens += u.completion_tokens;
    }
    const char* object = spec_.kind == ApiKind::kCompletion ? "text_completion" : "chat.completion.chunk";
    const json timings = timings_json(choices_[0].final.timings, choices_[0].final.usage, choices_[0].final.spec);
    if (!write(out, sse_event(usage_chunk(spec_.meta, object, usage_json(total), timings)))) return false;
  }
  if (!write(out, std::string(kSseDone))) return false;
  return true;
}

void StreamSession::record(RequestRecord& r) const {
  r.num_choices = static_cast<int>(choices_.size());
  for (size_t i = 0; i < choices_.size(); ++i) {
    const engine::FinalEvent& f = choices_[i].final;
    if (i % static_cast<size_t>(spec_.n) == 0) {
      r.prompt_tokens += f.usage.prompt_tokens;
      r.cached_tokens += f.usage.cached_prompt_tokens;
    }
    r.completion_tokens += f.usage.completion_tokens;
  }
  if (!choices_.empty() && choices_[0].done) {
    const engine::FinalEvent& f = choices_[0].final;
    r.finish_reason = finish_reason_text(f.reason);
    r.queue_ms = f.timings.queue_ms;
    r.ttft_ms = f.timings.ttft_ms;
    r.e2e_ms = f.timings.e2e_ms;
  }
}

}  // namespace tokenmill::server
