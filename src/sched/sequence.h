// One request as the scheduler sees it: tokens, limits, priority, state and
// its KV block table. Owned by the Scheduler (unique_ptr) from add() until it
// finishes; then handed back to the engine (see scheduler.h).
//
// Token positions: the sequence's tokens are prompt followed by output.
// num_computed_tokens of them have K/V in the cache; a step computes tokens
// [num_computed_tokens, num_computed_tokens + n). When a step reaches the
// last known token, its logits give the next token (the engine samples it).
// So a decode is simply a step of one token, and a sequence that was
// preempted recomputes prompt + output as one longer prefill.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kv/block_table.h"
#include "kv/kv_policy.h"
#include "kv/prefix_cache.h"
#include "sched/request_outcome.h"
#include "util/clock.h"

namespace tokenmill::model {
class LoraAdapter;
}

namespace tokenmill::sched {

using TimePoint = SteadyClock::time_point;

enum class SequenceStatus { kWaiting, kRunning, kPreempted, kFinished };

// Everything about a sequence except its block tables: plain, copyable
// data (a fork starts as a copy of its parent's; see Sequence).
struct SequenceData {
  // ---- set by the caller before Scheduler::add ----
  uint64_t id = 0;
  std::vector<int32_t> prompt;  // must be non-empty
  int64_t max_tokens = 16;      // output tokens at most (>= 1)
  int priority = 1;             // class: 0 = highest; larger = lower
  // Prefix-cache namespace (kv::namespace_id or the engine's own): sequences
  // share cached blocks only within one namespace. Include the tenant when
  // isolating tenants.
  uint64_t cache_namespace = 0;
  // Whose limits apply (SchedulerConfig::tenants) and whose prefix-cache
  // blocks and metrics these are; "" is a tenant of its own.
  std::string tenant;
  // The LoRA adapter every forward pass of this sequence applies (null:
  // the base model). Its identity must be part of cache_namespace; the
  // name labels its prefix-cache metrics.
  std::shared_ptr<const model::LoraAdapter> adapter;
  std::string adapter_name;
  TimePoint arrival{};                // when the request reached the server
  std::optional<TimePoint> deadline;  // finishes with kTimeout once passed
  // Never take prefix-cache hits at admission: every position must be
  // computed (prompt log-probabilities need their logits). Still publishes.
  bool skip_prefix_lookup = false;
  // This request's long-context KV policy (kv/kv_policy.h); unset: the
  // scheduler's (SchedulerConfig::kv_policy), filled in by Scheduler::add.
  // An evicting one must be part of cache_namespace.
  std::optional<kv::KvPolicy> kv_policy;
  // Parallel samples (n > 1): the ids of the sequences to fork from this one
  // once its prefill completes, in Scheduler::commit (see fork_tokens there).
  // Each fork shares every block (copy-on-write); the list is cleared by the
  // fork. Until then this one sequence stands for all of them: admission
  // reserves num_samples() sequence slots.
  std::vector<uint64_t> fork_ids;

  // ---- set by the engine before each schedule() (speculative decoding) ----
  // Tokens proposed to follow the newest output token. A decode step then
  // also computes them (ScheduledSeq::num_draft, as many as fit) so that the
  // target can verify them in one pass; commit keeps the accepted ones and
  // clears the draft. Ignored (and cleared) for a sequence that is not
  // decoding.
  std::vector<int32_t> draft;

  // ---- maintained by the Scheduler ----
  std::vector<int32_t> output;
  SequenceStatus status = SequenceStatus::kWaiting;
  FinishReason finish_reason = FinishReason::kNone;
  RejectReason reject_reason = RejectReason::kNone;
  std::string error;                     // human-readable reason for kRejected / kError
  int64_t num_computed_tokens = 0;       // tokens (prompt + output) with K/V cached
  int64_t num_cached_prompt_tokens = 0;  // of those, prefix-cache hits at the last admission
  int64_t num_preemptions = 0;
  // Positions the KV policy evicted from the middle of the cache (whole
  // blocks; kv_policy.h): a computed token at position p past them lives
  // at cache index p - kv_evicted. 0 again after a preemption.
  int64_t kv_evicted = 0;
  // Tokens evicted over the request's life, preemptions included (metrics).
  int64_t kv_evicted_total = 0;
  // Scheduler::set_paused: the sequence keeps its blocks and its slot but
  // is left out of every step until resumed.
  bool paused = false;
  // Pending forks (fork_ids) paused before they exist; each fork starts paused.
  std::vector<uint64_t> paused_fork_ids;

  // Timing (set once each; first_* survive preemption).
  TimePoint queued{};
  std::optional<TimePoint> first_scheduled;
  std::optional<TimePoint> first_token;
  std::optional<TimePoint> finished;

  // Scheduler-private bookkeeping; do not modify.
  uint64_t admission_order = 0;             // FCFS tie-break (add() order)
  std::vector<kv::BlockHash> block_hashes;  // prefix-cache chain memo

  int64_t num_prompt_tokens() const { return static_cast<int64_t>(prompt.size()); }
  int64_t num_output_tokens() const { return static_cast<int64_t>(output.size()); }
  int64_t num_tokens() const { return num_prompt_tokens() + num_output_tokens(); }
  int64_t num_samples() const { return 1 + static_cast<int64_t>(fork_ids.size()); }
  // kv_policy, or kFull when unset.
  const kv::KvPolicy& policy() const;
  // Tokens whose K/V are not computed yet.
  int64_t num_uncomputed_tokens() const { return num_tokens() - num_computed_tokens; }
  // Cache index of the next token to compute (num_computed_tokens less the
  // evicted positions).
  int64_t num_cached_positions() const { return num_computed_tokens - kv_evicted; }
  // Its prefill is done: the only uncomputed token is the newest sampled one.
  bool is_decoding() const { return num_uncomputed_tokens() == 1 && !output.empty(); }
  // Token at position i of prompt + output. Precondition: 0 <= i < num_tokens().
  int32_t token_at(int64_t i) const;
  // Tokens [start, start + n) of prompt + output (a copy). [n]
  std::vector<int32_t> tokens(int64_t start, int64_t n) const;
  // prompt + output (a copy). [num_tokens()]
  std::vector<int32_t> all_tokens() const;
  bool is_finished() const { return status == SequenceStatus::kFinished; }
};

// A sequence: its data and one block table per KV layer group (group
// order, see SchedulerConfig::kv_groups; made by Scheduler::add). The
// tables own their blocks, so a Sequence is move-only.
struct Sequence : SequenceData {
  std::vector<kv::BlockTable> tables;
  const kv::BlockTable& table(size_t group = 0) const { return tables.at(group); }
};

}  // namespace tokenmill::sched
