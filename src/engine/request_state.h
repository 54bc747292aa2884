// The engine thread's side of one request: its sampler, streaming
// detokenizer, stop-string matcher and output stream, from admission until
// the final event. The scheduler owns the Sequence (tokens, blocks); this
// owns everything that turns sampled ids into events.
//
// Thread-safety: engine thread only (the stream it pushes to is thread-safe).
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/draft_state.h"
#include "engine/embedding_pool.h"
#include "engine/metrics.h"
#include "engine/output_stream.h"
#include "engine/request.h"
#include "engine/text_stream.h"
#include "grammar/matcher.h"
#include "sample/sampler.h"
#include "sample/token_filter.h"
#include "sched/sequence.h"
#include "tokenizer/tokenizer.h"
#include "util/clock.h"

namespace tokenmill::engine {

class RequestState {
 public:
  // Precondition: request validated (its sampling params construct a
  // Sampler). tokenizer may be null: events then carry no text and only
  // max_tokens ends generation.
  // sample_index: which of the request's parallel samples this is (the
  // caller seeds request.sampling accordingly).
  RequestState(std::shared_ptr<RequestStream> stream, const GenerateRequest& request, int32_t n_vocab,
               const tokenizer::Tokenizer* tokenizer, SteadyClock::time_point submitted, int sample_index = 0);

  RequestStream& stream() { return *stream_; }
  SteadyClock::time_point submitted() const { return submitted_; }

  // Called when the sequence appears in a step's batch; the first call
  // records the step index and the prompt tokens the prefix cache served.
  void note_scheduled(const sched::Sequence& seq, int64_t step);

  // True when a chunk of this request's prefill at [start_pos, start_pos +
  // num_tokens) must return every row (LogitRows::kAll): prompt
  // log-probabilities are asked for and some of its positions still lack one.
  bool wants_prompt_logits(int64_t start_pos, int64_t num_tokens) const;
  // Records the log-probability of prompt token pos + 1 from the logits row
  // of position pos (and its top alternatives). Positions already recorded
  // (a recompute after preemption) and those past the prompt are ignored.
  void record_prompt_logprob(const sched::Sequence& seq, int64_t pos,
                             std::span<const float> logits);  // [n_vocab]

  // Embedding requests (GenerateRequest::embedding): from now on the
  // request pools its prompt's final hidden states (n_embd wide) into the
  // vector its final event carries.
  void start_embedding(Pooling pooling, int64_t n_embd);
  bool is_embedding() const { return embedding_.has_value(); }
  // True when a chunk of this request's prefill at [start_pos, start_pos +
  // num_tokens) must output its hidden states (the pool still needs some).
  bool wants_hidden(int64_t start_pos, int64_t num_tokens) const;
  // Pools the hidden states of such a chunk ([num_tokens, n_embd]).
  void record_hidden(int64_t start_pos, std::span<const float> rows);

  // A parallel sample forked from `parent` (sample 0) at the end of their
  // shared prefill: takes its prompt log-probabilities and prefill records.
  void inherit_prefill(const RequestState& parent);

  // Picks the next token from the sequence's logits row (masked by the
  // request's grammar and its token bans, if any) and, when asked, computes its
  // log-probabilities (of the model's unmasked row, as vLLM reports them). A sampler failure (every token banned)
  // is recorded and returns 0; accept_token then ends the request with kError.
  int32_t sample(std::span<const float> logits,  // [n_vocab]
                 sample::SamplerScratch& scratch);

  // Takes the token sample() picked: detokenizes it, matches stop strings
  // and prepares its event (emit_token pushes it, after the commit).
  // Returns why generation ends with this token: kStop (EOS unless
  // ignore_eos, a stop token id, or a stop string), kError (the sampler failed), kLength
  // (max_tokens 0: the prompt was only scored), or kNone to go on (the
  // scheduler then checks max_tokens). With a grammar, kStop also when the
  // grammar allows nothing after this token.
  FinishReason accept_token(int32_t id, SteadyClock::time_point now, Metrics& metrics);
  // Pushes the events accept_token prepared since the last call, if any
  // (EOS prepares none; verifying a draft may accept several tokens).
  void emit_token();

  // Speculative decoding, for a sampled draft token (one that came with its
  // distribution q, DraftState::probs): the rejection rule against the
  // target's logits, with the request's own generator. Returns the token
  // to take (the draft, or the replacement drawn on rejection) and sets
  // `accepted`; log-probabilities and failures as sample().
  int32_t sample_against_draft(std::span<const float> logits,  // [n_vocab]
                               std::span<const float> q, int32_t draft, sample::SamplerScratch& scratch,
                               bool& accepted);
  DraftState& draft() { return draft_; }

  // The final event of a finished (or rejected) sequence: releases held
  // text, fills usage and timings. The caller pushes it.
  // Adds one forward pass this request took part in (whole pass, shared
  // with the rest of its batch): compute and collectives, in ms.
  void charge_forward(double compute_ms, double comm_ms) {
    forward_compute_ms_ += compute_ms;
    forward_comm_ms_ += comm_ms;
  }
  FinalEvent make_final(const sched::Sequence& seq, SteadyClock::time_point now);

 private:
  std::shared_ptr<RequestStream> stream_;
  bool want_logprobs_;
  int top_logprobs_;
  bool ignore_eos_;
  sample::Sampler sampler_;
  const tokenizer::Tokenizer* tokenizer_;
  std::optional<TextStream> text_;  // null without a tokenizer
  std::vector<int32_t> history_;    // prompt + sampled tokens, for penalties
  std::optional<TokenLogprob> pending_logprob_;
  // Sets pending_logprob_ for token `id` of `logits` when asked for.
  void record_logprob(std::span<const float> logits, int32_t id);
  std::vector<TokenEvent> unsent_events_;  // accept_token -> emit_token
  DraftState draft_;
  // Constrained decoding (GenerateRequest::grammar): the matcher follows
  // the accepted tokens; allowed_ is the mask of the next token.
  std::optional<grammar::GrammarMatcher> matcher_;
  // allowed_token_ids, bad_words, min_tokens (SamplingParams).
  sample::TokenFilter filter_;
  std::vector<int32_t> stop_token_ids_;  // sorted
  bool include_stop_str_ = false;
  std::vector<uint32_t> allowed_;  // [ceil(n_vocab / 32)]
  // Fills allowed_ from the matcher and the filter; an empty span when
  // neither can ban anything.
  std::span<const uint32_t> token_mask();
  int prompt_logprobs_ = -1;     // GenerateRequest::prompt_logprobs
  bool discard_output_ = false;  // max_tokens 0: the one sampled token is not output
  int64_t num_prompt_tokens_ = 0;
  std::vector<TokenLogprob> prompt_lps_;  // for prompt tokens 1.., until sent
  int64_t num_prompt_lps_ = 0;            // recorded so far (survives the hand-off)
  bool prompt_lps_sent_ = false;
  int sample_index_ = 0;
  std::string sample_error_;
  SteadyClock::time_point submitted_;
  std::optional<SteadyClock::time_point> last_token_;
  int64_t first_step_ = -1;
  int64_t cached_prompt_tokens_ = 0;
  // Embedding requests only (start_embedding).
  std::optional<EmbeddingPool> embedding_;
  double forward_compute_ms_ = 0;  // charge_forward's sums
  double forward_comm_ms_ = 0;
};

}  // namespace tokenmill::engine
