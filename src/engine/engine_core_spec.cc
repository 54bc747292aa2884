// EngineCore's speculative decoding phases (see engine_core.h): propose
// before schedule, draft_with_model between schedule and the forward pass,
// verify while sampling.
#include <algorithm>

#include "engine/engine_core.h"
#include "spec/ngram_proposer.h"
#include "util/clock.h"

namespace tokenmill::engine {
namespace {

// The sequence's newest token is sampled and not yet computed: it decodes.
bool is_decoding(const sched::Sequence& seq) {
  return seq.num_computed_tokens + 1 == seq.num_tokens() && !seq.output.empty();
}

}  // namespace

// Before schedule(): a draft length for each decoding sequence whose
// request allows one (k, or what the cost model says pays: spec/
// cost_model.h), then the draft itself by prompt lookup, or placeholders
// of that length that draft_with_model fills once the scheduler has
// reserved their KV slots (the draft model writes K/V there).
void EngineCore::propose(StepStats& stats) {
  if (!config_.spec.enabled()) return;
  const SteadyClock::time_point start = SteadyClock::now();
  int64_t decoding = 0;
  scheduler_->for_each_running([&](sched::Sequence& seq) { decoding += is_decoding(seq) ? 1 : 0; });
  int64_t drafted = 0;
  scheduler_->for_each_running([&](sched::Sequence& seq) {
    seq.draft.clear();
    if (!is_decoding(seq)) return;
    DraftState& draft = states_.at(seq.id).draft();
    draft.begin_draft();
    int k = draft.max_draft(config_.spec.ngram.max_draft);
    if (config_.spec.adaptive) k = cost_model_.choose_k(draft.acceptance(), decoding, k);
    if (k <= 0) {
      draft.note_idle();
      return;
    }
    if (config_.spec.method == spec::SpecMethod::kNgram) {
      seq.draft = spec::propose_ngram(seq.all_tokens(), k, config_.spec.ngram);
      drafted += static_cast<int64_t>(seq.draft.size());
    } else {
      seq.draft.assign(static_cast<size_t>(k), seq.token_at(seq.num_tokens() - 1));  // placeholders
    }
  });
  if (config_.spec.method == spec::SpecMethod::kNgram) {
    const double ms = ms_since(start);
    stats.draft_ms += ms;
    cost_model_.observe_draft(drafted, ms);
  }
}

// Self-speculation: the scheduled drafts, token by token. Pass j runs, for
// every entry still drafting, the token before draft slot j (the newest
// output for j = 0) at its position through the model with skip_layers_
// left out, and draws draft token j from the logits (DraftState::
// draft_token). Its K/V go to the slots the scheduler reserved for this
// step, which the verifying pass then overwrites with every layer's.
void EngineCore::draft_with_model(const sched::ScheduledBatch& batch, StepStats& stats) {
  if (config_.spec.method != spec::SpecMethod::kSelf) return;
  const SteadyClock::time_point start = SteadyClock::now();
  int64_t longest = 0, drafted = 0;
  for (const sched::ScheduledSeq& s : batch.seqs) longest = std::max(longest, s.num_draft);
  std::vector<runner::ModelRunner::DraftInput> inputs;
  std::vector<const sched::ScheduledSeq*> owners;
  std::vector<int32_t> history;
  for (int64_t j = 0; j < longest; ++j) {
    inputs.clear();
    owners.clear();
    for (const sched::ScheduledSeq& s : batch.seqs) {
      if (s.num_draft <= j) continue;
      const int32_t token = j == 0 ? s.seq->token_at(s.start_pos) : s.seq->draft[static_cast<size_t>(j - 1)];
      inputs.push_back({s.seq, token, s.start_pos + j});
      owners.push_back(&s);
    }
    const runner::StepLogits logits = runner_->run_draft(inputs, skip_layers_);
    for (size_t r = 0; r < owners.size(); ++r) {
      sched::Sequence& seq = *owners[r]->seq;
      RequestState& state = states_.at(seq.id);
      history.assign(state.history().begin(), state.history().end());
      history.insert(history.end(), seq.draft.begin(), seq.draft.begin() + j);
      seq.draft[static_cast<size_t>(j)] =
          state.draft().draft_token(logits.last_row(r), history, static_cast<size_t>(j), sampler_scratch_);
      ++drafted;
    }
  }
  if (drafted == 0) return;
  const double ms = ms_since(start);
  stats.draft_ms += ms;
  cost_model_.observe_draft(drafted, ms);
}

// Verification of entry i's draft against the target's logits, one row per
// position, stopping at the first rejected draft token or a stop:
//  - a draft token that came with its distribution q (sampled requests,
//    drafts from a model) is judged by the rejection rule
//    (RequestState::sample_against_draft): kept with probability
//    min(1, p/q), else replaced by a draw from max(0, p - q);
//  - any other draft token (prompt lookup; greedy requests) is a point
//    mass: the request's sampler picks from row j exactly as plain decoding
//    would (the same draw from the same history) and the draft token is
//    kept while they agree. For greedy and seeded requests the output is
//    then token for token plain decoding's. (For a point mass q, this is the
//    rejection rule: kept with probability p(d), else a draw from p
//    without d.)
// The row after the last kept draft token gives one more token either way.
void EngineCore::verify(const sched::ScheduledSeq& s, const runner::StepLogits& logits, size_t i,
                        sched::SampledEntry& entry, StepStats& stats) {
  RequestState& state = states_.at(s.seq->id);
  const SteadyClock::time_point now = SteadyClock::now();
  for (int64_t j = 0; j <= s.num_draft; ++j) {
    const std::span<const float> row = logits.row(i, static_cast<size_t>(j));
    const std::span<const float> q =
        j < s.num_draft ? state.draft().probs(static_cast<size_t>(j)) : std::span<const float>{};
    bool matches = false;
    int32_t token = 0;
    if (!q.empty()) {
      token = state.sample_against_draft(row, q, s.seq->draft[static_cast<size_t>(j)], sampler_scratch_, matches);
    } else {
      token = state.sample(row, sampler_scratch_);
      matches = j < s.num_draft && token == s.seq->draft[static_cast<size_t>(j)];
    }
    const FinishReason stop = state.accept_token(token, now, metrics_);
    ++stats.sampled_tokens;
    const sched::SampledToken t{s.seq->id, token, stop};
    if (stop != FinishReason::kNone || !matches) {
      entry.token = t;
      break;
    }
    entry.accepted.push_back(t);
    ++stats.accepted_tokens;
  }
  const auto accepted = static_cast<int64_t>(entry.accepted.size());
  state.draft().note_verified(s.num_draft, accepted);
  metrics_.on_spec_verified(accepted);
}

}  // namespace tokenmill::engine
