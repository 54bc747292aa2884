#include "engine/speculator.h"

#include <algorithm>

#include "spec/layer_skip.h"
#include "spec/ngram_proposer.h"
#include "util/clock.h"

namespace tokenmill::engine {
namespace {

// It decodes this step, unless it is paused (it sits out; no draft, no idle step).
bool decodes_now(const sched::Sequence& seq) { return seq.is_decoding() && !seq.paused; }

}  // namespace

Speculator::Speculator(const EngineConfig& config, const model::Model& model, runner::ModelRunner& runner,
                       RequestStates& states, Metrics& metrics, ThreadPool& pool)
    : config_(config.spec), runner_(runner), states_(states), metrics_(metrics) {
  if (config_.method == spec::SpecMethod::kSelf)
    skip_layers_ = spec::resolve_skip_layers(config_.skip_layers, model.config().n_layer);
  if (config_.method == spec::SpecMethod::kDraft) {
    // As many bytes as the target's pool (the draft is the smaller model:
    // the same context for every sequence costs it less).
    draft_model_ = std::make_unique<spec::DraftModel>(config_.draft_model, model, config.block_size, config.kv_dtype,
                                                      runner.kv_bytes(), pool);
  }
}

void Speculator::release(RequestId id) {
  if (draft_model_) draft_model_->release(id);
}

void Speculator::observe_forward(const sched::ScheduledBatch& batch, const StepStats& stats) {
  if (stats.prefill_tokens != 0) return;  // decode-only: the cost model's regime
  cost_model_.observe_step(batch.num_tokens(), stats.forward_ms);
  metrics_.set_spec_cost(cost_model_.fixed_ms(), cost_model_.per_token_ms(), cost_model_.draft_ms_per_token());
}

// Before schedule(): a draft length for each decoding sequence whose
// request allows one (k, or what the cost model says pays: spec/
// cost_model.h), then the draft itself by prompt lookup, or placeholders
// of that length that draft() fills once the scheduler has
// reserved their KV slots (the draft model writes K/V there).
void Speculator::propose(sched::Scheduler& scheduler, StepStats& stats) {
  const SteadyClock::time_point start = SteadyClock::now();
  int64_t decoding = 0;
  scheduler.for_each_running([&](sched::Sequence& seq) { decoding += decodes_now(seq) ? 1 : 0; });
  int64_t drafted = 0;
  scheduler.for_each_running([&](sched::Sequence& seq) {
    seq.draft.clear();
    if (!decodes_now(seq)) return;
    DraftState& draft = states_.at(seq.id).draft();
    draft.begin_draft();
    const int max_k = draft.max_draft(config_.ngram.max_draft);
    int k = max_k;
    if (config_.adaptive) {
      k = cost_model_.choose_k(draft.acceptance(acceptance_.alpha()), decoding, max_k);
      if (k == 0 && max_k > 0 && draft.idle_steps() >= spec::kProbeInterval) k = 1;  // a probe
    }
    if (k <= 0) {
      draft.note_idle();
      return;
    }
    if (config_.method == spec::SpecMethod::kNgram) {
      seq.draft = spec::propose_ngram(seq.all_tokens(), k, config_.ngram);
      drafted += static_cast<int64_t>(seq.draft.size());
    } else {
      seq.draft.assign(static_cast<size_t>(k), seq.token_at(seq.num_tokens() - 1));  // placeholders
    }
  });
  if (config_.method == spec::SpecMethod::kNgram) {
    const double ms = ms_since(start);
    stats.draft_ms += ms;
    cost_model_.observe_draft(drafted, ms);
  }
}

// Drafts from a model (self-speculation, or the draft model), for the
// scheduled drafts, token by token: pass j runs, batched over every entry
// still drafting, the token before draft slot j and draws draft token j
// from its logits (DraftState::draft_token). Pass 0 feeds the newest
// output (the target with layers skipped writes its K/V into the slot the
// scheduler reserved at that position; the verifying pass overwrites it
// with every layer's) or, for the draft model, whatever its own KV lacks
// (DraftModel::prepare). An entry the draft model has no room for keeps
// its placeholders, which verification treats as any point-mass draft.
void Speculator::draft(const sched::ScheduledBatch& batch, StepStats& stats) {
  if (config_.method != spec::SpecMethod::kSelf && config_.method != spec::SpecMethod::kDraft) return;
  const SteadyClock::time_point start = SteadyClock::now();
  // Per drafting entry: its prompt + output, then each draft token as it is
  // drawn (the history the draft's penalties see; reserved up front, so the
  // first pass's feeds can point into it).
  std::vector<const sched::ScheduledSeq*> entries;
  std::vector<std::vector<int32_t>> histories;
  std::vector<std::span<const int32_t>> first_feeds;
  for (const sched::ScheduledSeq& s : batch.seqs) {
    if (s.num_draft == 0) continue;
    std::vector<int32_t> history = s.seq->all_tokens();
    history.reserve(history.size() + static_cast<size_t>(s.num_draft));
    histories.push_back(std::move(history));
    const std::vector<int32_t>& all = histories.back();
    if (draft_model_) {
      const std::optional<std::span<const int32_t>> feed = draft_model_->prepare(s.seq->id, all, s.num_draft);
      if (!feed) {
        histories.pop_back();
        continue;
      }
      first_feeds.push_back(*feed);
    } else {
      first_feeds.push_back(std::span<const int32_t>(all).subspan(static_cast<size_t>(s.start_pos), 1));
    }
    entries.push_back(&s);
  }
  int64_t longest = 0, drafted = 0;
  for (const sched::ScheduledSeq* s : entries) longest = std::max(longest, s->num_draft);
  std::vector<size_t> active;  // entry indices still drafting at pass j
  std::vector<const sched::ScheduledSeq*> active_seqs;
  std::vector<std::span<const int32_t>> feeds;
  for (int64_t j = 0; j < longest; ++j) {
    active.clear();
    active_seqs.clear();
    feeds.clear();
    for (size_t e = 0; e < entries.size(); ++e) {
      if (entries[e]->num_draft <= j) continue;
      active.push_back(e);
      active_seqs.push_back(entries[e]);
      feeds.push_back(j == 0 ? first_feeds[e] : std::span<const int32_t>(&histories[e].back(), 1));
    }
    const runner::StepLogits logits = draft_pass(active_seqs, feeds, j);
    for (size_t r = 0; r < active.size(); ++r) {
      sched::Sequence& seq = *active_seqs[r]->seq;
      std::vector<int32_t>& history = histories[active[r]];
      const int32_t token =
          states_.at(seq.id).draft().draft_token(logits.last_row(r), history, static_cast<size_t>(j), sampler_scratch_);
      seq.draft[static_cast<size_t>(j)] = token;
      history.push_back(token);
      ++drafted;
    }
  }
  if (drafted == 0) return;
  const double ms = ms_since(start);
  stats.draft_ms += ms;
  cost_model_.observe_draft(drafted, ms);
}

runner::StepLogits Speculator::draft_pass(std::span<const sched::ScheduledSeq* const> entries,
                                          std::span<const std::span<const int32_t>> feeds, int64_t j) {
  if (draft_model_) {
    std::vector<spec::DraftModel::Feed> model_feeds;
    for (size_t r = 0; r < entries.size(); ++r) model_feeds.push_back({entries[r]->seq->id, feeds[r]});
    return draft_model_->run(model_feeds);
  }
  std::vector<runner::ModelRunner::DraftInput> inputs;
  for (size_t r = 0; r < entries.size(); ++r)
    inputs.push_back({entries[r]->seq, feeds[r].front(), entries[r]->start_pos + j});
  return runner_.run_draft(inputs, skip_layers_);
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
void Speculator::verify(const sched::ScheduledSeq& s, const runner::StepLogits& logits, size_t i,
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
  acceptance_.observe(s.num_draft, accepted);
  metrics_.on_spec_verified(accepted);
}

}  // namespace tokenmill::engine
