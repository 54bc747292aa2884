// Scheduler::schedule(): the per-step plan (see POLICY in scheduler.h).
#include <algorithm>
#include <cstdint>
#include <map>
#include <string>

#include "sched/scheduler.h"
#include "util/check.h"
#include "util/int_math.h"

namespace tokenmill::sched {

struct Scheduler::StepState {
  int64_t budget = 0;     // tokens still free in this step
  int64_t seq_slots = 0;  // sequences still free in this step
  bool stalled = false;   // a running sequence could not get the blocks it needed
};

namespace {

// Running rank: class first, then FCFS. The last element is the preemption victim.
bool rank_before(const Sequence& a, const Sequence& b) {
  if (a.priority != b.priority) return a.priority < b.priority;
  return a.admission_order < b.admission_order;
}

bool rank_less(const std::unique_ptr<Sequence>& a, const std::unique_ptr<Sequence>& b) { return rank_before(*a, *b); }

// A decode this step may run: paused sequences sit out.
bool decodes_now(const Sequence& seq) { return seq.is_decoding() && !seq.paused; }

}  // namespace

ScheduledBatch Scheduler::schedule(TimePoint now) {
  TM_CHECK_MSG(!batch_outstanding_, "schedule() called twice without commit()");
  ScheduledBatch batch;
  batch.copies.resize(num_groups());
  batch.key_shifts.resize(num_groups());
  apply_pending_finishes(batch, now);
  expire_deadlines(batch, now);
  while (!plan_step(batch, now)) {
  }
  batch_outstanding_ = !batch.seqs.empty();
  return batch;
}

void Scheduler::apply_pending_finishes(ScheduledBatch& batch, TimePoint now) {
  std::vector<PendingFinish> pending = std::move(pending_finishes_);
  pending_finishes_.clear();
  for (PendingFinish& p : pending) {
    for (auto* list : {&running_, &waiting_}) {
      const auto it = std::find_if(list->begin(), list->end(), [&](const auto& s) { return s->id == p.id; });
      if (it == list->end()) continue;
      if (p.reject != RejectReason::kNone) {  // reject_queued: only what never ran
        if (list != &waiting_ || (*it)->first_scheduled) break;
        (*it)->reject_reason = p.reject;
      }
      std::unique_ptr<Sequence> seq = std::move(*it);
      list->erase(it);
      if (!p.message.empty()) seq->error = std::move(p.message);
      finish(*seq, p.reason, now);
      batch.finished.push_back(std::move(seq));
      break;
    }
  }
}

void Scheduler::expire_deadlines(ScheduledBatch& batch, TimePoint now) {
  for (auto* list : {&running_, &waiting_}) {
    for (auto it = list->begin(); it != list->end();) {
      Sequence& seq = **it;
      if (!seq.deadline || *seq.deadline > now) {
        ++it;
        continue;
      }
      if (seq.first_scheduled) {
        seq.error = "the request's deadline passed";
        finish(seq, FinishReason::kTimeout, now);
      } else {  // never ran: the engine was too busy, a rejection
        seq.reject_reason = RejectReason::kDeadlineExpired;
        seq.error = "the request's deadline passed while it was queued";
        finish(seq, FinishReason::kRejected, now);
      }
      batch.finished.push_back(std::move(*it));
      it = list->erase(it);
    }
  }
}

// One planning pass. Returns false when it had to preempt to break a
// stall in which nothing could run; the caller then plans again.
bool Scheduler::plan_step(ScheduledBatch& batch, TimePoint now) {
  StepState step;
  step.budget = config_.max_batch_tokens;
  step.seq_slots = config_.max_seqs;
  std::sort(running_.begin(), running_.end(), rank_less);
  for (auto& seq : running_) {
    evict_by_policy(*seq, batch);
    drop_out_of_window(*seq);
  }
  schedule_decodes(step, batch);
  schedule_running_prefills(step, batch);
  if (step.stalled && config_.on_kv_exhausted == KvExhaustedPolicy::kReject) reject_unstarted(batch, now);
  if (!step.stalled) admit_waiting(step, batch, now);
  if (batch.seqs.empty() && step.stalled && !running_.empty()) {
    preempt(running_[victim_index()].get(), batch);
    return false;
  }
  return true;
}

void Scheduler::schedule_decodes(StepState& step, ScheduledBatch& batch) {
  // Every decode gets its one token first; draft tokens only use what is
  // left of the step's budget after one token for each decode still to come.
  int64_t decodes_left = std::count_if(running_.begin(), running_.end(), [](const auto& s) { return decodes_now(*s); });
  size_t i = 0;
  while (i < running_.size()) {
    Sequence& seq = *running_[i];
    if (!decodes_now(seq)) {
      seq.draft.clear();
      ++i;
      continue;
    }
    TM_CHECK(step.budget > 0 && step.seq_slots > 0);  // max_batch_tokens >= max_seqs >= running
    --decodes_left;
    int64_t num_draft = draft_length(seq, step.budget - 1 - decodes_left);
    bool got = append_slots(seq, 1 + num_draft, batch);
    if (!got && num_draft > 0) {  // short of blocks: decode without the draft
      num_draft = 0;
      got = append_slots(seq, 1, batch);
    }
    bool self_preempted = false;
    while (!got) {
      if (config_.on_kv_exhausted != KvExhaustedPolicy::kPreempt) {
        step.stalled = true;
        break;
      }
      // Everything after i ranks lower and is not scheduled yet, and no
      // paused sequence is scheduled.
      const size_t victim = victim_index();
      preempt(running_[victim].get(), batch);
      if (victim == i) {
        self_preempted = true;
        break;
      }
      if (victim < i) --i;  // seq moved down one place
      got = append_slots(seq, 1, batch);
    }
    if (self_preempted) continue;  // running_[i] is now the next sequence
    seq.draft.resize(static_cast<size_t>(num_draft));
    if (got) {
      batch.seqs.push_back({&seq, seq.num_computed_tokens, 1 + num_draft, true, true, num_draft});
      step.budget -= 1 + num_draft;
      --step.seq_slots;
    }
    ++i;
  }
}

// How many of seq's draft tokens a decode may verify: no more than the
// budget allows, and none past max_tokens (the target's own token after
// them must still be allowed).
int64_t Scheduler::draft_length(const Sequence& seq, int64_t budget) const {
  const int64_t room = seq.max_tokens - seq.num_output_tokens() - 1;
  return std::max<int64_t>(0, std::min({static_cast<int64_t>(seq.draft.size()), budget, room}));
}

void Scheduler::schedule_running_prefills(StepState& step, ScheduledBatch& batch) {
  for (auto& owned : running_) {
    Sequence& seq = *owned;
    if (seq.is_decoding() || seq.paused) continue;
    if (step.budget == 0 || step.seq_slots == 0) return;
    const int64_t left = seq.num_uncomputed_tokens();
    int64_t chunk = config_.prefill_chunk > 0 ? std::min(left, config_.prefill_chunk) : left;
    chunk = std::min(chunk, step.budget);
    chunk = std::min(chunk, max_appendable(seq));
    if (chunk <= 0) {
      step.stalled = true;
      continue;
    }
    TM_CHECK(append_slots(seq, chunk, batch));
    batch.seqs.push_back({&seq, seq.num_computed_tokens, chunk, chunk == left, false});
    step.budget -= chunk;
    --step.seq_slots;
  }
}

std::vector<std::pair<int, Sequence*>> Scheduler::waiting_order(TimePoint now) const {
  std::vector<std::pair<int, Sequence*>> order;
  order.reserve(waiting_.size());
  for (const auto& seq : waiting_) order.emplace_back(effective_priority(*seq, now), seq.get());
  std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
    if (a.first != b.first) return a.first < b.first;
    return a.second->admission_order < b.second->admission_order;
  });
  return order;
}

std::vector<RankedSequence> Scheduler::ranked(TimePoint now) const {
  std::vector<RankedSequence> out;
  out.reserve(running_.size() + waiting_.size());
  for (const auto& seq : running_) out.push_back({seq.get(), true, seq->priority});
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return rank_before(*a.seq, *b.seq); });
  for (const auto& [prio, seq] : waiting_order(now)) out.push_back({seq, false, prio});
  return out;
}

void Scheduler::admit_waiting(StepState& step, ScheduledBatch& batch, TimePoint now) {
  // Rank by effective (aged) class, then FCFS. Computed once: aging is a
  // function of `now`, fixed for the step.
  const std::vector<std::pair<int, Sequence*>> order = waiting_order(now);
  // Slots each tenant holds, only when some tenant's running is limited.
  std::map<std::string, int64_t> running_by_tenant;
  const bool count_tenants = config_.tenants.limits_running();
  if (count_tenants) {
    for (const auto& seq : running_) running_by_tenant[seq->tenant] += seq->num_samples();
  }
  for (const auto& [prio, seq] : order) {
    if (step.budget == 0 || step.seq_slots == 0) return;
    // Not eligible now: passed over, not waited for.
    if (seq->paused || !tenant_may_start(*seq, running_by_tenant)) continue;
    // A sequence with forks needs a slot for each of its samples, and so do
    // running ones whose forks are not made yet.
    if (running_slots() + seq->num_samples() > config_.max_seqs) return;
    Admission admitted = try_admit(*seq, step, batch, now);
    // Paused sequences yield their blocks to work that can run.
    while (admitted == Admission::kNoBlocks && preempt_paused(batch)) admitted = try_admit(*seq, step, batch, now);
    if (admitted != Admission::kAdmitted) return;  // the head waits; nobody overtakes it
    if (count_tenants) running_by_tenant[seq->tenant] += seq->num_samples();
    // (A named copy: clang 14 cannot capture a structured binding.)
    const Sequence* admitted_seq = seq;
    const auto it =
        std::find_if(waiting_.begin(), waiting_.end(), [&](const auto& p) { return p.get() == admitted_seq; });
    running_.push_back(std::move(*it));
    waiting_.erase(it);
  }
}

bool Scheduler::tenant_may_start(const Sequence& seq, const std::map<std::string, int64_t>& running_by_tenant) const {
  const int64_t limit = config_.tenants.of(seq.tenant).max_running;
  if (limit == 0) return true;
  const auto it = running_by_tenant.find(seq.tenant);
  const int64_t running = it == running_by_tenant.end() ? 0 : it->second;
  return running + seq.num_samples() <= limit;
}

// Admits one waiting sequence if its whole remaining prefill fits the free
// blocks (after what running sequences still need) and its first chunk fits
// the step. Looks up the prefix cache; no side effects when it returns false.
Scheduler::Admission Scheduler::try_admit(Sequence& seq, StepState& step, ScheduledBatch& batch, TimePoint now) {
  const std::vector<int32_t> tokens = seq.all_tokens();
  const kv::PrefixMatch match =
      seq.skip_prefix_lookup ? kv::PrefixMatch{} : prefix_cache_.lookup(seq.cache_namespace, tokens);
  const int64_t left = seq.num_tokens() - match.num_tokens;
  int64_t chunk = config_.prefill_chunk > 0 ? std::min(left, config_.prefill_chunk) : left;
  chunk = std::min(chunk, step.budget);
  // No chunking: wait for a step with room for the whole prefill. Only a
  // recompute (prompt + output) can exceed max_batch_tokens; it is split.
  const bool whole_only = config_.prefill_chunk == 0 && left <= config_.max_batch_tokens;
  if (whole_only && chunk < left) return Admission::kNoBudget;
  // Every group must have the blocks of the whole remaining prefill (a
  // group with a window: up to what one sequence ever holds at once), after
  // what running sequences still need, counting hits revived from the
  // evictable list.
  const int64_t end_block = (seq.num_tokens() + config_.block_size - 1) / config_.block_size;
  for (size_t g = 0; g < num_groups(); ++g) {
    const kv::BlockAllocator& allocator = *allocators_[g];
    const std::span<const kv::BlockId> hit =
        g < match.groups.size() ? std::span<const kv::BlockId>(match.groups[g].blocks) : std::span<const kv::BlockId>();
    const int64_t first = g < match.groups.size() ? match.groups[g].first : 0;
    // At least what this chunk appends after the hits: a hit may be longer
    // than an evicting policy's bound (blocks published before the first
    // eviction), and the policy trims it only at the next step.
    const int64_t chunk_blocks =
        ceil_div(match.num_tokens + chunk, config_.block_size) - first - static_cast<int64_t>(hit.size());
    const int64_t wanted =
        std::max<int64_t>(chunk_blocks, std::min(end_block - first, config_.blocks_per_seq(g, &seq.policy())) -
                                            static_cast<int64_t>(hit.size()));
    const int64_t revived =
        std::count_if(hit.begin(), hit.end(), [&](kv::BlockId id) { return allocator.is_evictable(id); });
    if (wanted + revived + blocks_reserved_by_running(g) > allocator.num_available()) return Admission::kNoBlocks;
  }

  prefix_cache_.acquire(match, seq.num_tokens());
  seq.tables = new_tables();
  for (size_t g = 0; g < match.groups.size(); ++g)
    seq.tables[g].assign_prefix(match.groups[g].blocks, match.groups[g].first);
  seq.block_hashes = match.hashes;
  seq.num_computed_tokens = match.num_tokens;
  seq.num_cached_prompt_tokens = match.num_tokens;
  TM_CHECK(append_slots(seq, chunk, batch));
  seq.status = SequenceStatus::kRunning;
  if (!seq.first_scheduled) {
    batch.prefix_lookups.push_back(prefix_lookup(seq, tokens, match));
    seq.first_scheduled = now;
  }
  batch.seqs.push_back({&seq, match.num_tokens, chunk, chunk == left, false});
  step.budget -= chunk;
  --step.seq_slots;
  return Admission::kAdmitted;
}

// At a first admission tokens are the prompt alone: each is a hit or a miss.
PrefixLookup Scheduler::prefix_lookup(const Sequence& seq, std::span<const int32_t> tokens,
                                      const kv::PrefixMatch& match) const {
  PrefixLookup out;
  out.tenant = seq.tenant;
  out.adapter = seq.adapter_name;
  out.hit_tokens = match.num_tokens;
  if (seq.skip_prefix_lookup && prefix_cache_.enabled()) {
    out.miss_tokens[static_cast<size_t>(kv::PrefixMissReason::kLogprobsBypass)] = static_cast<int64_t>(tokens.size());
  } else {
    out.miss_tokens = prefix_cache_.classify_misses(seq.cache_namespace, tokens, match);
  }
  return out;
}

size_t Scheduler::victim_index() const {
  TM_CHECK(!running_.empty());
  for (size_t j = running_.size(); j-- > 0;) {
    if (running_[j]->paused) return j;
  }
  return running_.size() - 1;
}

bool Scheduler::preempt_paused(ScheduledBatch& batch) {
  if (config_.on_kv_exhausted != KvExhaustedPolicy::kPreempt || running_.empty()) return false;
  const size_t victim = victim_index();
  if (!running_[victim]->paused) return false;
  preempt(running_[victim].get(), batch);
  return true;
}

int64_t Scheduler::running_slots() const {
  int64_t n = 0;
  for (const auto& seq : running_) n += seq->num_samples();
  return n;
}

void Scheduler::reject_unstarted(ScheduledBatch& batch, TimePoint now) {
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    Sequence& seq = **it;
    if (seq.first_scheduled) {
      ++it;
      continue;
    }
    seq.reject_reason = RejectReason::kKvExhausted;
    seq.error = "the KV cache ran out of blocks while the request was queued";
    finish(seq, FinishReason::kRejected, now);
    batch.finished.push_back(std::move(*it));
    it = waiting_.erase(it);
  }
}

void Scheduler::preempt(const Sequence* victim, ScheduledBatch& batch) {
  std::unique_ptr<Sequence> seq = take_running(victim);
  release_blocks(*seq);
  seq->block_hashes.clear();
  seq->num_computed_tokens = 0;
  seq->num_cached_prompt_tokens = 0;
  seq->kv_evicted = 0;
  if (attention_mass_ != nullptr) attention_mass_->erase(seq->id);
  seq->status = SequenceStatus::kPreempted;
  ++seq->num_preemptions;
  ++num_preemptions_;
  batch.preempted.push_back(seq.get());
  waiting_.push_back(std::move(seq));
}

void Scheduler::release_blocks(Sequence& seq) {
  for (kv::BlockTable& t : seq.tables) t.free();
}

void Scheduler::drop_out_of_window(Sequence& seq) {
  for (size_t g = 0; g < num_groups(); ++g) {
    // The next token, at num_computed_tokens, attends no position before this.
    const int64_t window = config_.kv_groups[g].window;
    const int64_t first_needed = seq.num_cached_positions() - window + 1;
    if (window > 0 && first_needed > 0) seq.tables[g].drop_before(first_needed);
  }
}

void Scheduler::evict_by_policy(Sequence& seq, ScheduledBatch& batch) {
  const kv::KvPolicy& policy = seq.policy();
  const int64_t bs = config_.block_size;
  const int64_t cached = seq.num_cached_positions();
  // Mass of positions no longer cached (rejected draft tokens) goes first.
  std::span<const float> mass;
  if (attention_mass_ != nullptr) {
    attention_mass_->trim(seq.id, cached);
    mass = attention_mass_->get(seq.id);
  }
  const std::vector<int64_t> evicted = kv::blocks_to_evict_now(policy, cached, bs, mass);
  if (evicted.empty()) return;
  const bool rerotate = policy.positions == kv::KvPositions::kRerotate;
  // Each held block of each group, in order: evicted, or how many evicted
  // blocks precede it (with kRerotate a block that moves is rewritten, so a
  // shared one needs a private copy first; all or nothing).
  std::vector<std::vector<int64_t>> moves(num_groups());  // -1: evicted
  for (size_t g = 0; g < num_groups(); ++g) {
    const kv::BlockTable& t = seq.tables[g];
    int64_t shared = 0;
    for (size_t i = 0; i < t.blocks().size(); ++i) {
      const int64_t logical = t.first_block() + static_cast<int64_t>(i);
      const bool gone = std::binary_search(evicted.begin(), evicted.end(), logical);
      const int64_t before = kv::evicted_before(evicted, logical);
      moves[g].push_back(gone ? -1 : before);
      if (!gone && before > 0 && t.is_shared(i)) ++shared;
    }
    if (rerotate && shared > allocators_[g]->num_available()) return;
  }
  for (size_t g = 0; g < num_groups(); ++g) {
    kv::BlockTable& t = seq.tables[g];
    for (auto it = evicted.rbegin(); it != evicted.rend(); ++it) t.remove_block(*it);
    if (!rerotate) continue;
    size_t i = 0;  // the kept blocks, now at held index i
    for (const int64_t before : moves[g]) {
      if (before < 0) continue;
      if (before > 0) {
        TM_CHECK(t.make_private(i, &batch.copies[g]));
        batch.key_shifts[g].push_back({t.blocks()[i], -before * bs});
      }
      ++i;
    }
  }
  if (attention_mass_ != nullptr) attention_mass_->erase_blocks(seq.id, evicted, bs);
  const int64_t n = static_cast<int64_t>(evicted.size()) * bs;
  seq.kv_evicted += n;
  seq.kv_evicted_total += n;
  kv_evicted_tokens_ += n;
}

bool Scheduler::append_slots(Sequence& seq, int64_t n, ScheduledBatch& batch) {
  for (size_t g = 0; g < num_groups(); ++g) {
    if (seq.tables[g].blocks_needed(n) > allocators_[g]->num_available()) return false;
  }
  for (size_t g = 0; g < num_groups(); ++g) TM_CHECK(seq.tables[g].append_slots(n, &batch.copies[g]));
  return true;
}

int64_t Scheduler::max_appendable(const Sequence& seq) const {
  int64_t n = INT64_MAX;
  for (size_t g = 0; g < num_groups(); ++g)
    n = std::min(n, seq.tables[g].max_appendable(allocators_[g]->num_available()));
  return n;
}

}  // namespace tokenmill::sched
