#include "engine/request_state.h"

#include <algorithm>

#include "sample/logprobs.h"
#include "spec/rejection_rule.h"
#include "util/error.h"

namespace tokenmill::engine {

RequestState::RequestState(std::shared_ptr<RequestStream> stream, const GenerateRequest& request, int32_t n_vocab,
                           const tokenizer::Tokenizer* tokenizer, SteadyClock::time_point submitted, int sample_index)
    : stream_(std::move(stream)),
      want_logprobs_(request.logprobs || request.top_logprobs > 0),
      top_logprobs_(request.top_logprobs),
      ignore_eos_(request.sampling.ignore_eos),
      sampler_(request.sampling, n_vocab),
      tokenizer_(tokenizer),
      history_(request.prompt),
      draft_(request.sampling, n_vocab, request.spec_max_draft),
      filter_(request.sampling,
              tokenizer != nullptr ? std::span<const int32_t>(tokenizer->end_of_generation_ids())
                                   : std::span<const int32_t>(),
              n_vocab),
      stop_token_ids_(request.sampling.stop_token_ids),
      include_stop_str_(request.sampling.include_stop_str_in_output),
      prompt_logprobs_(request.prompt_logprobs),
      discard_output_(request.max_tokens == 0),
      num_prompt_tokens_(static_cast<int64_t>(request.prompt.size())),
      sample_index_(sample_index),
      submitted_(submitted) {
  if (tokenizer_ != nullptr) {
    const sample::SamplingParams& p = request.sampling;
    text_.emplace(*tokenizer_, p.stop,
                  TextOptions{p.skip_special_tokens, p.spaces_between_special_tokens, p.include_stop_str_in_output,
                              p.min_tokens});
  }
  std::sort(stop_token_ids_.begin(), stop_token_ids_.end());
  if (request.grammar) matcher_.emplace(request.grammar);
  if (matcher_ || filter_.active()) allowed_.assign((static_cast<size_t>(n_vocab) + 31) / 32, 0u);
}

std::span<const uint32_t> RequestState::token_mask() {
  const std::span<const int32_t> output =
      std::span<const int32_t>(history_).subspan(static_cast<size_t>(num_prompt_tokens_));
  if (!matcher_ && !filter_.active_after(output.size())) return {};
  if (matcher_) {
    // Ids past the tokenizer's vocabulary (padded output rows) stay banned.
    const size_t words = std::min(allowed_.size(), matcher_->compiled().vocab().mask_words());
    std::fill(allowed_.begin() + static_cast<std::ptrdiff_t>(words), allowed_.end(), 0u);
    matcher_->fill_mask(std::span<uint32_t>(allowed_.data(), words));
  } else {
    std::fill(allowed_.begin(), allowed_.end(), ~0u);
  }
  filter_.apply(output, allowed_);
  return allowed_;
}

void RequestState::note_scheduled(const sched::Sequence& seq, int64_t step) {
  if (first_step_ >= 0) return;
  first_step_ = step;
  cached_prompt_tokens_ = std::min(seq.num_cached_prompt_tokens, seq.num_prompt_tokens());
}

bool RequestState::wants_prompt_logits(int64_t start_pos, int64_t num_tokens) const {
  const int64_t next_missing = num_prompt_lps_;  // the row position still needed
  return prompt_logprobs_ >= 0 && next_missing < num_prompt_tokens_ - 1 && start_pos <= next_missing &&
         next_missing < start_pos + num_tokens;
}

void RequestState::record_prompt_logprob(const sched::Sequence& seq, int64_t pos, std::span<const float> logits) {
  const int64_t target = pos + 1;  // the token this row predicts
  if (prompt_logprobs_ < 0 || target >= num_prompt_tokens_ || target != num_prompt_lps_ + 1) return;
  const int32_t id = seq.prompt[static_cast<size_t>(target)];
  TokenLogprob lp;
  const float logit = logits[static_cast<size_t>(id)];
  lp.logprob = static_cast<float>(static_cast<double>(logit) - sample::log_sum_exp(logits));
  if (prompt_logprobs_ > 0) lp.top = sample::top_logprobs(logits, prompt_logprobs_);
  lp.rank =
      1 + static_cast<int32_t>(std::count_if(logits.begin(), logits.end(), [logit](float v) { return v > logit; }));
  prompt_lps_.push_back(std::move(lp));
  ++num_prompt_lps_;
}

void RequestState::start_embedding(Pooling pooling, int64_t n_embd) {
  embedding_.emplace(pooling, num_prompt_tokens_, n_embd);
}

bool RequestState::wants_hidden(int64_t start_pos, int64_t num_tokens) const {
  return embedding_ && embedding_->wants(start_pos, num_tokens);
}

void RequestState::record_hidden(int64_t start_pos, std::span<const float> rows) {
  if (embedding_) embedding_->add(start_pos, rows);
}

void RequestState::inherit_prefill(const RequestState& parent) {
  prompt_lps_ = parent.prompt_lps_;
  num_prompt_lps_ = parent.num_prompt_lps_;
  first_step_ = parent.first_step_;
  cached_prompt_tokens_ = parent.cached_prompt_tokens_;
}

int32_t RequestState::sample(std::span<const float> logits, sample::SamplerScratch& scratch) {
  pending_logprob_.reset();
  int32_t id = 0;
  try {
    id = sampler_.sample(logits, history_, scratch, token_mask());
  } catch (const Error& e) {
    sample_error_ = e.what();
    return 0;
  }
  record_logprob(logits, id);
  return id;
}

int32_t RequestState::sample_against_draft(std::span<const float> logits, std::span<const float> q, int32_t draft,
                                           sample::SamplerScratch& scratch, bool& accepted) {
  pending_logprob_.reset();
  accepted = false;
  int32_t id = 0;
  try {
    sampler_.distribution(logits, history_, scratch, scratch.probs, token_mask());
    const spec::DraftVerdict verdict = spec::judge_draft(scratch.probs, q, draft, sampler_.uniform(), scratch.residual);
    accepted = verdict.accepted;
    id = accepted ? draft : sampler_.draw_weighted(*verdict.residual);
  } catch (const Error& e) {
    sample_error_ = e.what();
    return 0;
  }
  record_logprob(logits, id);
  return id;
}

void RequestState::record_logprob(std::span<const float> logits, int32_t id) {
  if (!want_logprobs_) return;
  TokenLogprob lp;
  const double lse = sample::log_sum_exp(logits);
  lp.logprob = static_cast<float>(static_cast<double>(logits[static_cast<size_t>(id)]) - lse);
  if (top_logprobs_ > 0) lp.top = sample::top_logprobs(logits, top_logprobs_);
  pending_logprob_ = std::move(lp);
}

FinishReason RequestState::accept_token(int32_t id, SteadyClock::time_point now, Metrics& metrics) {
  if (!sample_error_.empty()) return FinishReason::kError;
  if (discard_output_) return FinishReason::kLength;  // max_tokens 0: scored the prompt only
  // With ignore_eos an end-of-generation token is output like any other
  // and ends nothing, so it leaves the grammar where it was (it adds no text).
  const bool ignored_eog = ignore_eos_ && tokenizer_ != nullptr && tokenizer_->is_end_of_generation(id);
  if (matcher_ && !ignored_eog) {
    try {
      // The mask makes a refusal impossible; fail closed rather than emit it.
      if (!matcher_->accept_token(id))
        sample_error_ = fmt::format("internal error: token {} is outside the grammar", id);
    } catch (const Error& e) {  // a pathologically ambiguous grammar
      sample_error_ = e.what();
    }
    if (!sample_error_.empty()) return FinishReason::kError;
  }
  history_.push_back(id);
  if (last_token_) metrics.on_token_gap(ms_between(*last_token_, now));
  last_token_ = now;
  if (!ignore_eos_ && tokenizer_ != nullptr && tokenizer_->is_end_of_generation(id)) {
    return FinishReason::kStop;  // EOS is counted but not streamed
  }
  const bool stop_token = std::binary_search(stop_token_ids_.begin(), stop_token_ids_.end(), id);
  if (stop_token && !include_stop_str_) return FinishReason::kStop;  // counted, not streamed, as EOS
  TokenEvent event;
  event.token = id;
  if (prompt_logprobs_ >= 0 && !prompt_lps_sent_) {
    event.prompt_logprobs = std::move(prompt_lps_);
    prompt_lps_sent_ = true;
  }
  event.logprob = std::move(pending_logprob_);
  pending_logprob_.reset();
  bool stopped = false;
  if (text_) {
    TextStream::Piece piece = text_->push(id);
    event.text = std::move(piece.text);
    stopped = piece.stopped;
  }
  unsent_events_.push_back(std::move(event));
  // A complete sentence that nothing may extend: end now, as EOS would.
  const bool grammar_done = matcher_ && matcher_->must_end();
  return stopped || grammar_done || stop_token ? FinishReason::kStop : FinishReason::kNone;
}

void RequestState::emit_token() {
  for (TokenEvent& event : unsent_events_) stream_->push_token(std::move(event));
  unsent_events_.clear();
}

FinalEvent RequestState::make_final(const sched::Sequence& seq, SteadyClock::time_point now) {
  FinalEvent f;
  // kNone cannot end a sequence: an internal error if it ever does.
  f.reason = seq.finish_reason == FinishReason::kNone ? FinishReason::kError : seq.finish_reason;
  f.reject = seq.reject_reason;
  f.error = !sample_error_.empty() ? sample_error_ : seq.error;
  if (f.reason == FinishReason::kError && f.error.empty()) f.error = "internal error";
  if (f.reason != FinishReason::kRejected && text_) f.text = text_->finish();
  f.usage.prompt_tokens = seq.num_prompt_tokens();
  f.usage.cached_prompt_tokens = cached_prompt_tokens_;
  f.usage.completion_tokens = discard_output_ ? 0 : seq.num_output_tokens();
  if (prompt_logprobs_ >= 0 && !prompt_lps_sent_) {
    f.prompt_logprobs = std::move(prompt_lps_);
    prompt_lps_sent_ = true;
  }
  // Only a request that ran to its end has its whole prompt pooled.
  if (embedding_ && f.reason == FinishReason::kLength && embedding_->complete()) f.embedding = embedding_->finish();
  f.num_preemptions = seq.num_preemptions;
  f.spec = draft_.stats();
  f.sample_index = sample_index_;
  f.first_scheduled_step = first_step_;

  Timings& t = f.timings;
  t.kv_evicted_tokens = seq.kv_evicted_total;
  t.e2e_ms = ms_between(submitted_, now);
  t.queue_ms = seq.first_scheduled ? ms_between(submitted_, *seq.first_scheduled) : t.e2e_ms;
  if (seq.first_token) {
    t.ttft_ms = ms_between(submitted_, *seq.first_token);
    if (seq.first_scheduled) t.prefill_ms = ms_between(*seq.first_scheduled, *seq.first_token);
    if (last_token_) t.decode_ms = std::max(0.0, ms_between(*seq.first_token, *last_token_));
    if (f.usage.completion_tokens > 1) t.tpot_ms = t.decode_ms / static_cast<double>(f.usage.completion_tokens - 1);
  }
  t.forward_compute_ms = forward_compute_ms_;
  t.forward_comm_ms = forward_comm_ms_;
  return f;
}

}  // namespace tokenmill::engine
