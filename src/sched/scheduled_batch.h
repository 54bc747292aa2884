// What one engine step runs: the hand-off from Scheduler::schedule() to the
// model runner, and back into Scheduler::commit().
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kv/block_table.h"
#include "kv/kv_policy.h"
#include "kv/prefix_miss.h"
#include "sched/sequence.h"

namespace tokenmill::sched {

// One sequence's share of the step: compute tokens
// [start_pos, start_pos + num_tokens) of seq's prompt + output, writing their
// K/V at cache indices from start_pos - seq->kv_evicted through seq->tables
// (one per KV group, already sized for them).
struct ScheduledSeq {
  Sequence* seq = nullptr;  // owned by the Scheduler; valid until commit()
  int64_t start_pos = 0;    // == seq->num_computed_tokens at schedule()
  int64_t num_tokens = 0;   // 1 for a decode; a chunk for a prefill
  // True when the step reaches the sequence's last known token: the runner
  // must return that position's logits and the engine samples the next
  // token. False for a non-final prefill chunk.
  bool samples = false;
  // A decode step: the sequence's newest sampled output, then num_draft
  // draft tokens. False for prefill chunks (prompt, or prompt + output
  // recomputed after a preemption).
  bool is_decode = false;
  // Speculative decoding: the last num_draft of the num_tokens are
  // seq->draft[0, num_draft), not yet output. The runner returns every
  // position's logits; the engine verifies the draft against them
  // (SampledEntry::accepted) and commit keeps the K/V of the accepted ones.
  int64_t num_draft = 0;

  // The tokens this entry computes: num_tokens - num_draft of prompt +
  // output from start_pos, then the draft's.
  std::vector<int32_t> tokens() const;
};

// The prefix cache's answer for a sequence admitted for the first time:
// every prompt token is a hit or a miss with its reason (kv/prefix_miss.h).
struct PrefixLookup {
  std::string tenant;
  std::string adapter;  // SequenceData::adapter_name
  int64_t hit_tokens = 0;
  kv::PrefixMissCounts miss_tokens{};
};

struct ScheduledBatch {
  // Decodes first, then prefill chunks. Empty when there is nothing to run.
  std::vector<ScheduledSeq> seqs;
  // Copy-on-write block copies of each KV group's pool (group order); apply
  // all, in order (PagedKvStorage::copy_block), before the forward pass.
  std::vector<std::vector<kv::BlockCopy>> copies;
  // KV policy kRerotate (kv_policy.h): each group's blocks whose keys move
  // down in the cache; rotate them by `delta` positions after the copies,
  // before the forward pass (Model::shift_keys).
  std::vector<std::vector<kv::KeyShift>> key_shifts;
  // Sequences that ended inside schedule() (cancelled, timed out, rejected
  // because the pool ran dry under the reject policy); their blocks are
  // already freed. The engine reports them and drops them.
  std::vector<std::unique_ptr<Sequence>> finished;
  // Sequences preempted this step (still owned by the Scheduler, back in the
  // waiting queue). For metrics/logging only; valid until the next call.
  std::vector<const Sequence*> preempted;
  // One per sequence first admitted this step (not re-admissions after a
  // preemption), for metrics.
  std::vector<PrefixLookup> prefix_lookups;

  int64_t num_tokens() const {
    int64_t n = 0;
    for (const ScheduledSeq& s : seqs) n += s.num_tokens;
    return n;
  }
  bool empty() const { return seqs.empty(); }
  size_t num_copies() const {
    size_t n = 0;
    for (const auto& group : copies) n += group.size();
    return n;
  }
};

}  // namespace tokenmill::sched
