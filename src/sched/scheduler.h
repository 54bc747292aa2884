// The continuous-batching scheduler: capacity (does a request fit the KV
// pool?) and step scheduling (what runs in this forward pass?).
//
// USAGE (engine thread only; nothing here is thread-safe):
//
//   Scheduler sched(config);                 // owns the block allocator and prefix cache
//   // for each new request:
//   if (auto rejected = sched.add(std::move(seq), now)) report(*rejected);  // kRejected + error
//   // the step loop:
//   while (sched.has_work()) {
//     ScheduledBatch batch = sched.schedule(now);
//     for (auto& s : batch.finished) report(*s);    // cancelled / timed out / rejected
//     if (batch.empty()) continue;                  // only when nothing is left to run
//     logits = runner.run(batch);                   // block copies, then the forward pass
//     SampledStep sampled = sample(batch, logits);  // a token (and stop decision) per
//                                                   //   entry with samples == true
//     for (auto& s : sched.commit(batch, sampled, now)) report(*s);  // stop / length
//   }
//   // on a failed forward pass: sched.fail_batch(batch, message, now) instead of commit.
//   sched.cancel(id) at any time: the sequence ends (kCancelled) at the next schedule().
//   sched.set_paused(id, true / false) at any time: left out of steps until resumed.
//
// schedule() and commit()/fail_batch() must alternate (commit of an empty
// batch is allowed and does nothing); add(), cancel(), set_paused() and the getters may be
// called at any time. Finished sequences are handed back as unique_ptr with
// their blocks freed; status kFinished, finish_reason, output and timing
// filled in. A batch entry's tokens are seq->tokens(start_pos, num_tokens)
// at positions start_pos.., its block tables seq->tables (one per KV group).
// Cost: schedule() is O(running + waiting log waiting) plus the prefix-cache
// hashing of each admitted sequence; commit() is O(batch) plus hashing of
// newly full blocks.
//
// POLICY
// * Admission (add): a sequence whose prompt + max_tokens can never fit
//   (more blocks than the whole pool, counting every parallel sample's own
//   blocks; with a window pool, n > 1 samples each decoding with a full
//   window's blocks must fit it too; or longer than max_model_len), or
//   whose prompt exceeds max_batch_tokens when chunked prefill is off, is
//   rejected at once (kPromptTooLong / kContextExceeded / kKvNeverFits), as
//   are an empty prompt or max_tokens < 1 (kInvalid), more parallel samples
//   than its tenant's max_running (kInvalid), and arrivals beyond the
//   queue bound (kQueueFull).
// * Queue bound: max_waiting counts only the waiting sequences that could
//   not start now. A sequence is accepted while num_waiting < max_waiting +
//   free sequence slots (max_seqs minus the running sequences' slots,
//   parallel samples counted), so a burst arriving between two steps on an
//   idle engine is admitted up to max_seqs + max_waiting. A tenant's own
//   max_waiting works alike with its free slots: the global ones, capped by
//   what its max_running leaves. The refusal names the bound that was hit.
// * Under the kReject policy a sequence is also rejected at add
//   (kKvExhausted) when the blocks of its prompt are not available right
//   now (free + evictable, minus what waiting prompts and unfinished
//   prefills already need; prefix hits are not counted, so this errs on the
//   side of rejecting).
// * Tenants (SchedulerConfig::tenants, tenant_limits.h; 0 = no limit):
//   while a tenant's running slots are at its max_running, its waiting
//   sequences are passed over (see "eligible" below); max_waiting bounds
//   its queue as above; max_prefix_blocks bounds its prefix-cache blocks.
// * Each step, first: pending cancels and expired deadlines end (kCancelled,
//   kTimeout; a deadline that passes before the sequence ever ran is a
//   rejection, kDeadlineExpired), freeing their blocks.
// * Paused sequences (set_paused; a pending fork's pause waits for the
//   fork) keep their blocks and slots and their place in the rank but are
//   left out of every step: no decode, no prefill chunk, no admission from
//   the queue. They never hold others back: they are skipped, not waited
//   for, and never make a step "stalled". Cancels, deadlines and
//   preemption apply to them as to any sequence (a preempted paused one is
//   readmitted only once resumed). Under kPreempt they are the first
//   victims: a running sequence short of a block, or the head of the queue
//   short of blocks, preempts the lowest-ranked paused sequence before any
//   other, so a client that stops reading cannot starve the pool. Pausing
//   sample 0 of parallel samples before their shared prefill pauses them
//   all (it carries the prefill).
// * Decode first: every running sequence whose prefill is done gets its one
//   token, in rank order, before any prefill; long prompts never stall
//   token streams. max_batch_tokens >= max_seqs (checked) so decodes always
//   fit the token budget.
// * Then prefill chunks, within the remaining token budget and max_seqs:
//   first the running sequences whose prefill is unfinished (they already
//   hold blocks), then waiting sequences in rank order. A chunk is at most
//   prefill_chunk tokens (0 = no chunking: the whole remaining prefill in one
//   step, waiting for a step with enough budget; only a recompute after
//   preemption longer than max_batch_tokens is split). A waiting sequence is
//   admitted only when the blocks for its whole remaining prefill are
//   available (after blocks reserved by unfinished prefills); if the head
//   of the queue does not fit, nobody behind it is admitted (no overtaking,
//   so large prompts are not starved). The rule applies among the eligible:
//   paused sequences and those of a tenant at its max_running are passed
//   over without blocking anyone behind them.
// * Rank: priority class (0 first), then FCFS (add() order). Aging: a
//   waiting sequence's effective class improves by one per
//   priority_aging_s seconds since it was queued, down to 0, so a
//   low-priority request eventually runs under a constant stream of
//   high-priority ones. Running sequences rank by their own class.
// * Prefix cache: looked up whenever a sequence is admitted from the queue
//   (first time, or after a preemption); hits become its first blocks and
//   count as computed. Never covers the last token. Blocks are published as
//   they fill (in commit), owned by the sequence's tenant and bounded by its
//   max_prefix_blocks (prefix_cache.h, "Publishers and quotas"). Sequences
//   with skip_prefix_lookup take no hits. At a sequence's first admission
//   every prompt token is reported once, as a hit or a miss with its reason
//   (ScheduledBatch::prefix_lookups).
// * KV layer groups (kv_groups): every sequence has a block table per
//   group, and every append takes blocks from every group's pool (all or
//   nothing; "the pool ran dry" means any pool). At the start of each step
//   the table of a group with a window releases the blocks wholly before
//   num_computed_tokens - window + 1, so a decoding sequence holds at most
//   ceil(window / block_size) + 1 of that group's blocks. A prefix hit also
//   needs every group's blocks that the next token attends (prefix_cache.h).
// * KV policy (kv_policy, kv_policy.h; a sequence may bring its own,
//   SequenceData::kv_policy): with kStreaming, at the start of
//   each step, before the window drop, a running sequence evicts the
//   blocks past its sinks that left its recent window, in every group
//   (kv_evicted grows; later positions move down in the cache); with
//   kHeavyHitter, the blocks of least attention mass (AttentionMass) between
//   them while it holds more than its budget. With
//   kRerotate the moved keys are rotated (ScheduledBatch::key_shifts) in
//   private blocks: a shared one is copied first, and when a pool has no
//   block for that the eviction waits for a later step. A sequence that
//   evicted publishes no more blocks to the prefix cache (its later blocks
//   are not the exact prefix). Admission bounds group 0's blocks by the
//   policy (admission.h). A preempted sequence recomputes from its first
//   token, evicting again as it goes.
// * Parallel samples: a sequence with fork_ids is admitted only when
//   num_samples() sequence slots are free (max_seqs), and forks in the commit
//   that completes its prefill; the forks rank like it and are preempted,
//   cancelled and finished independently from then on. A fork shares every
//   group's blocks (copy-on-write; a window table keeps its first held
//   block) and owns its own references in each pool.
// * KV exhausted while a running sequence needs a block for its next token:
//   - kPreempt: preempt the lowest-ranked paused running sequence, else the
//     lowest-ranked (lowest class, newest) running sequence not yet
//     scheduled this step (possibly the needy one itself):
//     its blocks are freed and it returns to the waiting queue with its
//     output kept; on readmission prompt + output are recomputed as a
//     prefill (prefix-cache hits make that cheap) and generation resumes.
//   - kQueue: the sequence skips this step and no new prefill is admitted
//     until blocks free up.
//   - kReject: as kQueue, and every waiting sequence that has not started
//     yet is rejected (kKvExhausted) to shed load.
//   Unfinished prefills never preempt: their chunk shrinks to what fits.
//   Under every policy, if nothing at all could run in a step while
//   sequences are running (all stalled), the lowest-ranked paused running
//   sequence, else the lowest-ranked running one, is preempted so the
//   others can proceed (no deadlock). Paused sequences alone never count as
//   stalled.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "kv/block_allocator.h"
#include "kv/prefix_cache.h"
#include "sched/admission.h"
#include "sched/attention_mass.h"
#include "sched/kv_group_config.h"
#include "sched/sampled_step.h"
#include "sched/scheduled_batch.h"
#include "sched/sequence.h"
#include "sched/tenant_limits.h"

namespace tokenmill::sched {

enum class KvExhaustedPolicy { kQueue, kReject, kPreempt };

struct SchedulerConfig {
  // The KV layer groups, each with its own pool; [0] has no window (it holds
  // every position: the full-attention layers, or every layer). One group
  // unless the model keeps sliding-window layers apart.
  std::vector<KvGroupConfig> kv_groups;
  int32_t block_size = 16;         // positions per block (KvGeometry::block_size)
  int64_t max_batch_tokens = 512;  // tokens per step, all sequences together
  int32_t max_seqs = 64;           // sequences running at once (and per step)
  int64_t prefill_chunk = 0;       // max prefill tokens per sequence per step; 0 = no chunking
  int64_t max_model_len = 0;       // prompt + max_tokens limit (model context); 0 = none
  int64_t max_waiting = 0;         // waiting sequences beyond the free slots (POLICY); 0 = none
  KvExhaustedPolicy on_kv_exhausted = KvExhaustedPolicy::kPreempt;
  double priority_aging_s = 0.0;  // seconds per class of aging; 0 = off
  bool enable_prefix_cache = true;
  TenantPolicy tenants;  // per-tenant limits (tenant_limits.h); none by default
  // What a long sequence keeps in the cache (kv_policy.h); kFull: everything.
  kv::KvPolicy kv_policy;

  // Throws Error naming the first bad field.
  void validate() const;
  // Most tokens one sequence writes in one step: the prefill chunk, bounded
  // by the step budget.
  int64_t max_step_tokens() const;
  // Most blocks of group g one sequence holds at once in a step of
  // step_tokens (admission.h's window_blocks_per_step); unbounded (INT64_MAX)
  // for a group without a window.
  // policy: a sequence's own KV policy (null: kv_policy).
  int64_t blocks_per_step(size_t g, int64_t step_tokens, const kv::KvPolicy* policy = nullptr) const;
  // The same for the longest step (max_step_tokens).
  int64_t blocks_per_seq(size_t g, const kv::KvPolicy* policy = nullptr) const {
    return blocks_per_step(g, max_step_tokens(), policy);
  }
  // The limits admission checks requests against (admission.h), with
  // `policy` in place of kv_policy when given (a request's own).
  CapacityLimits capacity(const kv::KvPolicy* policy = nullptr) const;
};

struct SchedulerStats {
  int64_t num_running = 0;
  int64_t num_waiting = 0;  // includes preempted sequences
  int64_t num_paused = 0;   // running or waiting sequences, and pending forks, that are paused
  int64_t free_seq_slots = 0;
  int64_t kv_blocks_total = 0;
  int64_t kv_blocks_used = 0;       // referenced
  int64_t kv_blocks_free = 0;       // free list
  int64_t kv_blocks_evictable = 0;  // cached, unreferenced (reclaimable)
  int64_t kv_blocks_high_water = 0;
  // The pools of groups 1.. together (the sliding-window layers'; else 0).
  int64_t kv_window_blocks_total = 0;
  int64_t kv_window_blocks_used = 0;
  int64_t kv_window_blocks_high_water = 0;
  int64_t num_preemptions = 0;
  int64_t num_rejections = 0;  // at add() and in schedule()
  int64_t num_timeouts = 0;
  int64_t num_cancellations = 0;
  int64_t kv_evicted_tokens = 0;  // positions the KV policy evicted, all sequences
  kv::PrefixCacheStats prefix_cache;
};

// A sequence in serving order (Scheduler::ranked).
struct RankedSequence {
  const Sequence* seq = nullptr;
  bool running = false;  // holds its slots; else waiting
  int rank_class = 0;    // its class: the effective (aged) one while waiting
};

class Scheduler {
 public:
  // Throws Error when config.validate() does. `attention_mass`: the table
  // the forward pass adds the heavy-hitter policy's score to (the model
  // runner's; it must outlive the scheduler), which the scheduler keeps
  // aligned with each sequence's cache and evicts by; null when no
  // sequence uses that policy (evictions then see no mass).
  explicit Scheduler(const SchedulerConfig& config, AttentionMass* attention_mass = nullptr);
  ~Scheduler();  // the remaining sequences' tables free their blocks
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Takes ownership of a new sequence (status kWaiting, no output yet).
  // Returns nullptr when accepted; otherwise returns it back finished with
  // kRejected, reject_reason and a clear error message.
  [[nodiscard]] std::unique_ptr<Sequence> add(std::unique_ptr<Sequence> seq, TimePoint now);

  // Ends a sequence at the next schedule() (kCancelled, or `reason` with
  // `message` in Sequence::error). Returns false when the id is unknown.
  bool cancel(uint64_t id);
  bool request_finish(uint64_t id, FinishReason reason, std::string message = {});
  // Refuses a waiting sequence that has never run (kRejected with `reason`
  // and `message`) at the next schedule(); one that started by then is left
  // alone. Returns false when the id is unknown.
  bool reject_queued(uint64_t id, RejectReason reason, std::string message);
  // Pauses or resumes a sequence, or a pending fork (see POLICY); takes
  // effect at the next schedule(). Returns false when the id is unknown.
  bool set_paused(uint64_t id, bool paused);
  // Resumes every sequence and pending fork (engine drain: a paused request
  // must not hold the shutdown forever).
  void resume_all();

  // Plans one step (see POLICY). The batch's Sequence pointers stay valid
  // until the matching commit()/fail_batch().
  ScheduledBatch schedule(TimePoint now);

  // Applies a step's results (see sampled_step.h): every entry's tokens
  // count as computed, full blocks are published to the prefix cache, and
  // each sampled token is appended. A sequence with pending forks forks
  // first, before its own token is appended: one sequence per fork id
  // sharing its blocks (refcounts up; the partly filled last block is copied
  // on the first write), each with its own first token. A token whose stop
  // is set ends its sequence with that reason; otherwise reaching
  // max_tokens ends it with kLength. Returns the sequences that finished,
  // blocks freed.
  std::vector<std::unique_ptr<Sequence>> commit(const ScheduledBatch& batch, const SampledStep& sampled, TimePoint now);
  // Drops a fork that was not made yet (a sample cancelled before its
  // prompt's prefill completed). False when `parent` is unknown or has no
  // such pending fork.
  bool drop_fork(uint64_t parent, uint64_t fork_id);
  // The forward pass failed: every sequence of the batch ends with kError.
  std::vector<std::unique_ptr<Sequence>> fail_batch(const ScheduledBatch& batch, const std::string& message,
                                                    TimePoint now);
  // Ends every sequence now with `reason` (engine shutdown).
  std::vector<std::unique_ptr<Sequence>> finish_all(FinishReason reason, TimePoint now);

  // Calls fn(Sequence&) for each running sequence, between commit() and
  // the next schedule(): the engine sets drafts (Sequence::draft) this way.
  template <typename Fn>
  void for_each_running(Fn&& fn) {
    for (std::unique_ptr<Sequence>& seq : running_) fn(*seq);
  }

  // The running sequences, then the waiting ones, in the order schedule()
  // serves them: running by rank, waiting by effective (aged) class at
  // `now`, then FCFS. What the SLO forecast replays (slo_forecast.h).
  std::vector<RankedSequence> ranked(TimePoint now) const;

  bool has_work() const { return !running_.empty() || !waiting_.empty(); }
  int64_t num_running() const { return static_cast<int64_t>(running_.size()); }
  int64_t num_waiting() const { return static_cast<int64_t>(waiting_.size()); }
  int64_t num_paused() const;
  // Sequence slots not taken by running sequences and their pending forks.
  int64_t free_seq_slots() const { return std::max<int64_t>(0, config_.max_seqs - running_slots()); }
  const Sequence* find(uint64_t id) const;  // nullptr when not held
  SchedulerStats stats() const;
  const SchedulerConfig& config() const { return config_; }
  // KV group g's block allocator (g < num_groups()).
  const kv::BlockAllocator& allocator(size_t g = 0) const { return *allocators_.at(g); }
  size_t num_groups() const { return allocators_.size(); }
  kv::PrefixCache& prefix_cache() { return prefix_cache_; }
  const kv::PrefixCache& prefix_cache() const { return prefix_cache_; }

 private:
  struct PendingFinish {
    uint64_t id;
    FinishReason reason;
    std::string message;
    RejectReason reject = RejectReason::kNone;  // reject_queued
  };
  struct StepState;  // per-schedule() working set (scheduler_step.cc)

  std::optional<Refusal> admission_error(const Sequence& seq) const;
  std::optional<Refusal> queue_bound_error(const Sequence& seq) const;
  // Slots held by running sequences of `tenant`, and its waiting sequences.
  int64_t tenant_running_slots(const std::string& tenant) const;
  int64_t tenant_waiting(const std::string& tenant) const;
  // The prefix-cache outcome of a first admission (hits, and misses by reason).
  PrefixLookup prefix_lookup(const Sequence& seq, std::span<const int32_t> tokens, const kv::PrefixMatch& match) const;

  void apply_pending_finishes(ScheduledBatch& batch, TimePoint now);
  void expire_deadlines(ScheduledBatch& batch, TimePoint now);
  bool plan_step(ScheduledBatch& batch, TimePoint now);
  void schedule_decodes(StepState& step, ScheduledBatch& batch);
  int64_t draft_length(const Sequence& seq, int64_t budget) const;
  void schedule_running_prefills(StepState& step, ScheduledBatch& batch);
  void admit_waiting(StepState& step, ScheduledBatch& batch, TimePoint now);
  // The waiting sequences with their effective class, in admission order.
  std::vector<std::pair<int, Sequence*>> waiting_order(TimePoint now) const;
  // Whether a tenant's max_running lets seq start, given the slots its
  // tenant holds (running_by_tenant, kept up to date over the step).
  bool tenant_may_start(const Sequence& seq, const std::map<std::string, int64_t>& running_by_tenant) const;
  enum class Admission { kAdmitted, kNoBudget, kNoBlocks };
  Admission try_admit(Sequence& seq, StepState& step, ScheduledBatch& batch, TimePoint now);
  // The preemption victim among the sequences not scheduled yet: the
  // lowest-ranked paused one (no one waits on its progress), else the
  // lowest-ranked of all. Precondition: running_ sorted by rank, non-empty.
  size_t victim_index() const;
  // Under kPreempt, preempts the lowest-ranked paused running sequence, if
  // any, so that a waiting sequence gets its blocks. False when none.
  bool preempt_paused(ScheduledBatch& batch);
  void reject_unstarted(ScheduledBatch& batch, TimePoint now);
  std::unique_ptr<Sequence> take_running(const Sequence* seq);
  void preempt(const Sequence* seq, ScheduledBatch& batch);
  void finish(Sequence& seq, FinishReason reason, TimePoint now);
  int effective_priority(const Sequence& seq, TimePoint now) const;
  // What running sequences still need from group g's pool for their next
  // step (ignoring what that step's drop releases).
  int64_t blocks_reserved_by_running(size_t g) const;
  int64_t blocks_wanted_by_waiting() const;
  void publish_computed(Sequence& seq);
  // One empty block table per group.
  std::vector<kv::BlockTable> new_tables();
  // Every group's table of a sequence (scheduler_step.cc). append_slots is
  // all or nothing across the groups; copies go to the batch.
  void release_blocks(Sequence& seq);
  void drop_out_of_window(Sequence& seq);
  // The KV policy's eviction before a step (see KV POLICY in POLICY).
  void evict_by_policy(Sequence& seq, ScheduledBatch& batch);
  bool append_slots(Sequence& seq, int64_t n, ScheduledBatch& batch);
  int64_t max_appendable(const Sequence& seq) const;
  int64_t running_slots() const;  // running sequences plus their pending forks
  void make_forks(Sequence& parent, std::span<const SampledToken> first_tokens, TimePoint now,
                  std::vector<std::unique_ptr<Sequence>>& done);
  // Appends one sampled token. Returns why the sequence ends with it (the
  // token's stop, else kLength at max_tokens), or kNone.
  FinishReason append_token(Sequence& seq, const SampledToken& sampled, TimePoint now);

  SchedulerConfig config_;
  // One per KV group; pointers stay valid (the prefix cache holds them).
  std::vector<std::unique_ptr<kv::BlockAllocator>> allocators_;
  AttentionMass* attention_mass_ = nullptr;  // not owned; may be null
  kv::PrefixCache prefix_cache_;
  std::vector<std::unique_ptr<Sequence>> running_;
  std::vector<std::unique_ptr<Sequence>> waiting_;
  std::vector<PendingFinish> pending_finishes_;
  uint64_t next_admission_order_ = 0;
  bool batch_outstanding_ = false;
  int64_t num_preemptions_ = 0;
  int64_t num_rejections_ = 0;
  int64_t num_timeouts_ = 0;
  int64_t num_cancellations_ = 0;
  int64_t kv_evicted_tokens_ = 0;
};

}  // namespace tokenmill::sched
