// What the engine decided for one step, handed to Scheduler::commit(): per
// batch entry, the token sampled from its last logits row (iff the entry
// samples), the first tokens of the forks it makes (parallel samples), and
// for each token whether generation stops there. The scheduler only applies
// it: appends, forks, checks max_tokens and frees what finished.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "sched/sequence.h"

namespace tokenmill::sched {

struct SampledToken {
  uint64_t seq_id = 0;  // the sequence it extends (a fork's own id for fork tokens)
  int32_t token = 0;
  // kNone to go on; else why the sequence ends with this token (kStop for
  // EOS or a stop string, kLength when no output is wanted, kError when
  // sampling failed). Scheduler::commit checks max_tokens only for kNone, so
  // a stop on the last allowed token reports kStop.
  FinishReason stop = FinishReason::kNone;
};

struct SampledEntry {
  // Speculative decoding: the draft tokens the target accepted, in order,
  // before `token` (the target's own token after them). Each has stop ==
  // kNone: verification ends at the first token that stops, which is then
  // `token`.
  std::vector<SampledToken> accepted;
  std::optional<SampledToken> token;  // set iff the batch entry samples
  // One per fork id of the entry's sequence, in fork_ids order, when the
  // entry samples and the sequence has pending forks; else empty.
  std::vector<SampledToken> forks;
};

struct SampledStep {
  std::vector<SampledEntry> entries;  // [batch.seqs.size()]

  // Every sampled token of the step, forks first within an entry, then its
  // accepted draft tokens, then its token (the order commit applies them in).
  template <typename Fn>
  void for_each_token(Fn&& fn) const {
    for (const SampledEntry& e : entries) {
      for (const SampledToken& f : e.forks) fn(f);
      for (const SampledToken& a : e.accepted) fn(a);
      if (e.token) fn(*e.token);
    }
  }
};

}  // namespace tokenmill::sched
