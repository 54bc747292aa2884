// Scheduler: configuration, admission (add), commit, finishing and gauges.
// The per-step planning lives in scheduler_step.cc.
#include "sched/scheduler.h"

#include <fmt/format.h>
#include <algorithm>

#include "util/check.h"
#include "util/error.h"
#include "util/int_math.h"

namespace tokenmill::sched {

void SchedulerConfig::validate() const {
  if (kv_groups.empty()) fail("scheduler: at least one KV group is needed");
  if (block_size <= 0) fail("scheduler: block_size must be positive, got {}", block_size);
  if (max_seqs <= 0) fail("scheduler: max_seqs must be positive, got {}", max_seqs);
  if (max_batch_tokens < max_seqs) {
    fail("scheduler: max_batch_tokens ({}) must be at least max_seqs ({}) so every decode fits a step",
         max_batch_tokens, max_seqs);
  }
  if (prefill_chunk < 0) fail("scheduler: prefill_chunk must be >= 0, got {}", prefill_chunk);
  if (max_model_len < 0) fail("scheduler: max_model_len must be >= 0, got {}", max_model_len);
  if (max_waiting < 0) fail("scheduler: max_waiting must be >= 0, got {}", max_waiting);
  if (!(priority_aging_s >= 0.0)) fail("scheduler: priority_aging_s must be >= 0, got {}", priority_aging_s);
  if (kv_groups[0].window != 0) fail("scheduler: KV group 0 must hold every position (window 0)");
  tenants.validate("scheduler: tenant_limits", "scheduler: default_tenant_limits");
  kv_policy.validate();
  if (kv_policy.evicts() && kv_groups[0].num_blocks < blocks_per_seq(0))
    fail("scheduler: the KV pool ({} blocks) cannot hold one sequence's sinks, window and step ({} blocks) under {}",
         kv_groups[0].num_blocks, blocks_per_seq(0), kv_policy.describe());
  for (size_t g = 0; g < kv_groups.size(); ++g) {
    const KvGroupConfig& group = kv_groups[g];
    if (group.num_blocks <= 0)
      fail("scheduler: KV group {} needs a positive number of blocks, got {}", g, group.num_blocks);
    if (group.window < 0) fail("scheduler: KV group {} has a negative window ({})", g, group.window);
    if (group.window > 0 && group.num_blocks < blocks_per_seq(g))
      fail("scheduler: the pool of KV group {} ({} blocks) cannot hold one sequence's window and step ({} blocks)", g,
           group.num_blocks, blocks_per_seq(g));
  }
}

int64_t SchedulerConfig::max_step_tokens() const { return sched::max_step_tokens(max_batch_tokens, prefill_chunk); }

int64_t SchedulerConfig::blocks_per_step(size_t g, int64_t step_tokens, const kv::KvPolicy* policy) const {
  const int64_t window = kv_groups.at(g).window;
  if (window > 0) return window_blocks_per_step(window, block_size, step_tokens);
  const kv::KvPolicy& p = policy != nullptr ? *policy : kv_policy;
  return p.evicts() ? p.max_blocks(block_size, step_tokens) : INT64_MAX;
}

CapacityLimits SchedulerConfig::capacity(const kv::KvPolicy* policy) const {
  CapacityLimits l;
  l.max_model_len = max_model_len;
  l.kv_groups = kv_groups;
  l.block_size = block_size;
  l.max_batch_tokens = max_batch_tokens;
  l.prefill_chunk = prefill_chunk;
  l.max_seqs = max_seqs;
  l.kv_policy = policy != nullptr ? *policy : kv_policy;
  return l;
}

static const SchedulerConfig& validated(const SchedulerConfig& config) {
  config.validate();
  return config;
}

static std::vector<std::unique_ptr<kv::BlockAllocator>> make_allocators(const SchedulerConfig& config) {
  std::vector<std::unique_ptr<kv::BlockAllocator>> out;
  for (const KvGroupConfig& g : config.kv_groups) out.push_back(std::make_unique<kv::BlockAllocator>(g.num_blocks));
  return out;
}

static std::vector<kv::CacheGroup> cache_groups(const SchedulerConfig& config,
                                                const std::vector<std::unique_ptr<kv::BlockAllocator>>& allocators) {
  std::vector<kv::CacheGroup> out;
  for (size_t g = 0; g < allocators.size(); ++g) out.push_back({allocators[g].get(), config.kv_groups[g].window});
  return out;
}

Scheduler::Scheduler(const SchedulerConfig& config, AttentionMass* attention_mass)
    : config_(validated(config)),
      allocators_(make_allocators(config_)),
      attention_mass_(attention_mass),
      prefix_cache_(cache_groups(config_, allocators_), config.block_size, config.enable_prefix_cache) {}

// Members go in reverse order: the sequences (whose block tables release
// their blocks) before the prefix cache, and that before the allocators.
Scheduler::~Scheduler() = default;

std::vector<kv::BlockTable> Scheduler::new_tables() {
  std::vector<kv::BlockTable> tables;
  for (const auto& allocator : allocators_) tables.emplace_back(*allocator, config_.block_size);
  return tables;
}

std::unique_ptr<Sequence> Scheduler::add(std::unique_ptr<Sequence> seq, TimePoint now) {
  TM_CHECK(seq != nullptr);
  TM_CHECK_MSG(seq->status == SequenceStatus::kWaiting && seq->output.empty(), "add() of a used sequence");
  seq->queued = now;
  if (!seq->kv_policy) seq->kv_policy = config_.kv_policy;
  if (std::optional<Refusal> r = admission_error(*seq)) {
    seq->status = SequenceStatus::kFinished;
    seq->finish_reason = FinishReason::kRejected;
    seq->reject_reason = r->reason;
    seq->error = std::move(r->message);
    seq->finished = now;
    ++num_rejections_;
    return seq;
  }
  seq->admission_order = next_admission_order_++;
  seq->tables = new_tables();
  waiting_.push_back(std::move(seq));
  return nullptr;
}

// The request's own shape, the capacity it can never exceed (admission.h),
// then what depends on this moment: the queue bound and, under kReject, the
// blocks free now.
std::optional<Refusal> Scheduler::admission_error(const Sequence& seq) const {
  const int64_t prompt_len = seq.num_prompt_tokens();
  if (prompt_len == 0) return Refusal{RejectReason::kInvalid, "the prompt is empty"};
  if (seq.max_tokens < 1) {
    return Refusal{RejectReason::kInvalid, fmt::format("max_tokens must be at least 1, got {}", seq.max_tokens)};
  }
  if (seq.priority < 0) {
    return Refusal{RejectReason::kInvalid, fmt::format("priority must be >= 0, got {}", seq.priority)};
  }
  if (find(seq.id) != nullptr) {
    return Refusal{RejectReason::kInvalid, fmt::format("request id {} is already scheduled", seq.id)};
  }
  try {
    seq.policy().validate();
  } catch (const Error& e) {
    return Refusal{RejectReason::kInvalid, e.what()};
  }
  if (seq.num_samples() > config_.max_seqs) {
    return Refusal{RejectReason::kInvalid,
                   fmt::format("{} parallel samples exceed max_seqs ({})", seq.num_samples(), config_.max_seqs)};
  }
  const TenantLimits& tenant = config_.tenants.of(seq.tenant);
  if (tenant.max_running > 0 && seq.num_samples() > tenant.max_running) {
    return Refusal{RejectReason::kInvalid,
                   fmt::format("{} parallel samples exceed tenant \"{}\"'s max_running limit ({})", seq.num_samples(),
                               seq.tenant, tenant.max_running)};
  }
  if (std::optional<Refusal> never =
          never_fits(config_.capacity(&seq.policy()), prompt_len, seq.max_tokens, seq.num_samples()))
    return never;
  if (std::optional<Refusal> full = queue_bound_error(seq)) return full;
  if (config_.on_kv_exhausted == KvExhaustedPolicy::kReject) {
    const int64_t need = ceil_div(prompt_len, config_.block_size);
    const int64_t free = allocator().num_available() - blocks_reserved_by_running(0) - blocks_wanted_by_waiting();
    if (need > free) {
      return Refusal{RejectReason::kKvExhausted,
                     fmt::format("the KV cache is exhausted: the prompt needs {} blocks, {} are free", need,
                                 std::max<int64_t>(0, free))};
    }
  }
  return std::nullopt;
}

// The bounds count only what cannot start now (POLICY): waiting sequences
// beyond the free slots, globally and per tenant.
std::optional<Refusal> Scheduler::queue_bound_error(const Sequence& seq) const {
  const int64_t free_slots = free_seq_slots();
  if (config_.max_waiting > 0 && num_waiting() >= config_.max_waiting + free_slots) {
    return Refusal{
        RejectReason::kQueueFull,
        fmt::format("the waiting queue is full ({} requests waiting, max_waiting {}, {} free sequence slots)",
                    num_waiting(), config_.max_waiting, free_slots)};
  }
  const TenantLimits& limits = config_.tenants.of(seq.tenant);
  if (limits.max_waiting == 0) return std::nullopt;
  int64_t tenant_free = free_slots;
  if (limits.max_running > 0)
    tenant_free = std::clamp<int64_t>(limits.max_running - tenant_running_slots(seq.tenant), 0, tenant_free);
  const int64_t waiting = tenant_waiting(seq.tenant);
  if (waiting < limits.max_waiting + tenant_free) return std::nullopt;
  return Refusal{RejectReason::kQueueFull,
                 fmt::format("tenant \"{}\" is at its waiting limit ({} requests waiting, tenant max_waiting {})",
                             seq.tenant, waiting, limits.max_waiting)};
}

int64_t Scheduler::tenant_running_slots(const std::string& tenant) const {
  int64_t n = 0;
  for (const auto& seq : running_) n += seq->tenant == tenant ? seq->num_samples() : 0;
  return n;
}

int64_t Scheduler::tenant_waiting(const std::string& tenant) const {
  return std::count_if(waiting_.begin(), waiting_.end(), [&](const auto& seq) { return seq->tenant == tenant; });
}

bool Scheduler::set_paused(uint64_t id, bool paused) {
  for (auto* list : {&running_, &waiting_}) {
    for (auto& seq : *list) {
      if (seq->id == id) {
        seq->paused = paused;
        return true;
      }
      if (std::find(seq->fork_ids.begin(), seq->fork_ids.end(), id) == seq->fork_ids.end()) continue;
      std::vector<uint64_t>& forks = seq->paused_fork_ids;
      std::erase(forks, id);
      if (paused) forks.push_back(id);
      return true;
    }
  }
  return false;
}

void Scheduler::resume_all() {
  for (auto* list : {&running_, &waiting_}) {
    for (auto& seq : *list) {
      seq->paused = false;
      seq->paused_fork_ids.clear();
    }
  }
}

int64_t Scheduler::num_paused() const {
  int64_t n = 0;
  for (const auto* list : {&running_, &waiting_}) {
    for (const auto& seq : *list) n += (seq->paused ? 1 : 0) + static_cast<int64_t>(seq->paused_fork_ids.size());
  }
  return n;
}

bool Scheduler::cancel(uint64_t id) { return request_finish(id, FinishReason::kCancelled); }

bool Scheduler::request_finish(uint64_t id, FinishReason reason, std::string message) {
  TM_CHECK(reason != FinishReason::kNone);
  if (find(id) == nullptr) return false;
  pending_finishes_.push_back({id, reason, std::move(message)});
  return true;
}

bool Scheduler::reject_queued(uint64_t id, RejectReason reason, std::string message) {
  TM_CHECK(reason != RejectReason::kNone);
  if (find(id) == nullptr) return false;
  pending_finishes_.push_back({id, FinishReason::kRejected, std::move(message), reason});
  return true;
}

const Sequence* Scheduler::find(uint64_t id) const {
  for (const auto& seq : running_) {
    if (seq->id == id) return seq.get();
  }
  for (const auto& seq : waiting_) {
    if (seq->id == id) return seq.get();
  }
  return nullptr;
}

std::unique_ptr<Sequence> Scheduler::take_running(const Sequence* seq) {
  const auto it = std::find_if(running_.begin(), running_.end(), [&](const auto& p) { return p.get() == seq; });
  TM_CHECK(it != running_.end());
  std::unique_ptr<Sequence> out = std::move(*it);
  running_.erase(it);
  return out;
}

void Scheduler::finish(Sequence& seq, FinishReason reason, TimePoint now) {
  release_blocks(seq);
  if (attention_mass_ != nullptr) attention_mass_->erase(seq.id);
  seq.block_hashes.clear();
  seq.status = SequenceStatus::kFinished;
  seq.finish_reason = reason;
  seq.finished = now;
  if (reason == FinishReason::kTimeout) ++num_timeouts_;
  if (reason == FinishReason::kCancelled) ++num_cancellations_;
  if (reason == FinishReason::kRejected) ++num_rejections_;
}

void Scheduler::publish_computed(Sequence& seq) {
  // After an eviction the tables no longer hold the exact prefix.
  if (!prefix_cache_.enabled() || seq.kv_evicted > 0) return;
  const int64_t full = seq.num_computed_tokens / config_.block_size;
  if (full <= static_cast<int64_t>(seq.block_hashes.size())) return;
  const std::vector<int32_t> computed = seq.tokens(0, full * config_.block_size);
  const kv::PublishQuota quota{tenant_key(seq.tenant), config_.tenants.of(seq.tenant).max_prefix_blocks};
  prefix_cache_.publish(seq.cache_namespace, computed, seq.tables, &seq.block_hashes, quota);
}

std::vector<std::unique_ptr<Sequence>> Scheduler::commit(const ScheduledBatch& batch, const SampledStep& sampled,
                                                         TimePoint now) {
  TM_CHECK(sampled.entries.size() == batch.seqs.size());
  TM_CHECK_MSG(batch_outstanding_ || batch.seqs.empty(), "commit() without a matching schedule()");
  batch_outstanding_ = false;
  std::vector<std::unique_ptr<Sequence>> done;
  for (size_t i = 0; i < batch.seqs.size(); ++i) {
    const ScheduledSeq& s = batch.seqs[i];
    const SampledEntry& entry = sampled.entries[i];
    Sequence& seq = *s.seq;
    TM_CHECK(seq.status == SequenceStatus::kRunning && seq.num_computed_tokens == s.start_pos);
    TM_CHECK_MSG(entry.token.has_value() == s.samples, "a token must be sampled exactly where samples is set");
    TM_CHECK(static_cast<int64_t>(entry.accepted.size()) <= s.num_draft);
    // Rejected draft tokens: their K/V is not kept, nor are their slots.
    const int64_t rejected = s.num_draft - static_cast<int64_t>(entry.accepted.size());
    seq.num_computed_tokens += s.num_tokens - rejected;
    if (rejected > 0) {
      for (kv::BlockTable& t : seq.tables) t.truncate(seq.num_cached_positions());
    }
    seq.draft.clear();
    TM_CHECK(seq.num_cached_positions() <= seq.table(0).num_tokens());
    if (!s.samples) {
      publish_computed(seq);
      continue;
    }
    TM_CHECK(entry.token->seq_id == seq.id);
    if (!seq.fork_ids.empty()) make_forks(seq, entry.forks, now, done);
    FinishReason ended = FinishReason::kNone;
    for (const SampledToken& a : entry.accepted) {
      TM_CHECK(a.seq_id == seq.id && a.stop == FinishReason::kNone);
      ended = append_token(seq, a, now);
      TM_CHECK_MSG(ended == FinishReason::kNone, "a draft longer than max_tokens allows was verified");
    }
    publish_computed(seq);  // after the accepted tokens: their K/V is computed
    ended = append_token(seq, *entry.token, now);
    if (ended == FinishReason::kNone) continue;
    std::unique_ptr<Sequence> owned = take_running(&seq);
    finish(*owned, ended, now);
    done.push_back(std::move(owned));
  }
  return done;
}

FinishReason Scheduler::append_token(Sequence& seq, const SampledToken& sampled, TimePoint now) {
  seq.output.push_back(sampled.token);
  if (!seq.first_token) seq.first_token = now;
  if (sampled.stop != FinishReason::kNone) return sampled.stop;
  return seq.num_output_tokens() >= seq.max_tokens ? FinishReason::kLength : FinishReason::kNone;
}

// Creates one sequence per fork id of `parent`, whose step has just
// computed its last known token: a copy sharing every block (retained once
// more), with its own first token. Forks that finish at once (a stop, or
// max_tokens 1) go to `done` with their blocks released.
void Scheduler::make_forks(Sequence& parent, std::span<const SampledToken> first_tokens, TimePoint now,
                           std::vector<std::unique_ptr<Sequence>>& done) {
  TM_CHECK_MSG(first_tokens.size() == parent.fork_ids.size() && parent.output.empty(),
               "a sequence with fork_ids sampled without one first token per fork");
  const std::vector<uint64_t> ids = std::move(parent.fork_ids);
  parent.fork_ids.clear();
  const std::vector<uint64_t> paused_forks = std::move(parent.paused_fork_ids);
  parent.paused_fork_ids.clear();
  for (size_t k = 0; k < ids.size(); ++k) {
    TM_CHECK(first_tokens[k].seq_id == ids[k]);
    // The parent's data, and its tables forked: every block retained once
    // more, in every group (a window table keeps its first held block).
    auto child = std::make_unique<Sequence>();
    static_cast<SequenceData&>(*child) = parent;
    for (const kv::BlockTable& t : parent.tables) child->tables.push_back(t.fork());
    child->id = ids[k];
    if (attention_mass_ != nullptr) attention_mass_->fork(parent.id, child->id);
    child->paused = std::find(paused_forks.begin(), paused_forks.end(), ids[k]) != paused_forks.end();
    const FinishReason ended = append_token(*child, first_tokens[k], now);
    if (ended == FinishReason::kNone) {
      running_.push_back(std::move(child));
      continue;
    }
    finish(*child, ended, now);
    done.push_back(std::move(child));
  }
}

bool Scheduler::drop_fork(uint64_t parent, uint64_t fork_id) {
  for (auto* list : {&running_, &waiting_}) {
    for (auto& seq : *list) {
      if (seq->id != parent) continue;
      const auto it = std::find(seq->fork_ids.begin(), seq->fork_ids.end(), fork_id);
      if (it == seq->fork_ids.end()) return false;
      seq->fork_ids.erase(it);
      std::erase(seq->paused_fork_ids, fork_id);
      return true;
    }
  }
  return false;
}

std::vector<std::unique_ptr<Sequence>> Scheduler::fail_batch(const ScheduledBatch& batch, const std::string& message,
                                                             TimePoint now) {
  TM_CHECK_MSG(batch_outstanding_ || batch.seqs.empty(), "fail_batch() without a matching schedule()");
  batch_outstanding_ = false;
  std::vector<std::unique_ptr<Sequence>> done;
  for (const ScheduledSeq& s : batch.seqs) {
    std::unique_ptr<Sequence> owned = take_running(s.seq);
    owned->error = message;
    finish(*owned, FinishReason::kError, now);
    done.push_back(std::move(owned));
  }
  return done;
}

std::vector<std::unique_ptr<Sequence>> Scheduler::finish_all(FinishReason reason, TimePoint now) {
  TM_CHECK(reason != FinishReason::kNone);
  std::vector<std::unique_ptr<Sequence>> done;
  for (auto* list : {&running_, &waiting_}) {
    for (auto& seq : *list) {
      finish(*seq, reason, now);
      done.push_back(std::move(seq));
    }
    list->clear();
  }
  pending_finishes_.clear();
  batch_outstanding_ = false;
  return done;
}

int Scheduler::effective_priority(const Sequence& seq, TimePoint now) const {
  if (config_.priority_aging_s <= 0.0 || seq.priority == 0) return seq.priority;
  const double waited = std::chrono::duration<double>(now - seq.queued).count();
  const double classes = waited / config_.priority_aging_s;
  if (classes >= seq.priority) return 0;
  return seq.priority - static_cast<int>(std::max(0.0, classes));
}

int64_t Scheduler::blocks_reserved_by_running(size_t g) const {
  int64_t n = 0;
  for (const auto& seq : running_) {
    const kv::BlockTable& table = seq->table(g);
    int64_t unreserved = seq->num_tokens() - table.num_tokens();
    // A group with a window needs at most one step's worth ahead.
    if (config_.kv_groups[g].window > 0) unreserved = std::min(unreserved, config_.max_step_tokens());
    n += table.blocks_needed(unreserved);
  }
  return n;
}

int64_t Scheduler::blocks_wanted_by_waiting() const {
  int64_t n = 0;
  for (const auto& seq : waiting_) n += ceil_div(seq->num_tokens(), config_.block_size);
  return n;
}

SchedulerStats Scheduler::stats() const {
  SchedulerStats s;
  s.num_running = num_running();
  s.num_waiting = num_waiting();
  s.num_paused = num_paused();
  s.free_seq_slots = free_seq_slots();
  const kv::BlockAllocator& primary = allocator(0);
  s.kv_blocks_total = primary.num_blocks();
  s.kv_blocks_used = primary.num_used();
  s.kv_blocks_free = primary.num_free();
  s.kv_blocks_evictable = primary.num_evictable();
  s.kv_blocks_high_water = primary.high_water();
  for (size_t g = 1; g < num_groups(); ++g) {
    s.kv_window_blocks_total += allocator(g).num_blocks();
    s.kv_window_blocks_used += allocator(g).num_used();
    s.kv_window_blocks_high_water += allocator(g).high_water();
  }
  s.num_preemptions = num_preemptions_;
  s.num_rejections = num_rejections_;
  s.num_timeouts = num_timeouts_;
  s.num_cancellations = num_cancellations_;
  s.kv_evicted_tokens = kv_evicted_tokens_;
  s.prefix_cache = prefix_cache_.stats();
  return s;
}

}  // namespace tokenmill::sched
