// Admission arithmetic, in one place: whether a request can EVER fit the
// engine (context, KV pool, step budget) and the most completion tokens it
// could ask for. Pure functions of the limits; the checks that depend on
// the moment (queue bound, free blocks, duplicate ids) are made only in
// Scheduler::add.
//
// Used by the scheduler (add), the engine (check_request, before a request
// is queued) and the server (the default max_tokens of a chat completion).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <vector>

#include "kv/kv_policy.h"
#include "sched/kv_group_config.h"
#include "sched/request_outcome.h"

namespace tokenmill::sched {

// The fixed limits a request is checked against.
struct CapacityLimits {
  // prompt + max_tokens limit (model context); 0 = none. Under a policy
  // that re-rotates (kv_policy.h, kRerotate) and keeps its positions
  // (sinks, window or budget, plus a step) within it, it bounds those
  // positions instead, and a request may run past it (runs_past_context).
  int64_t max_model_len = 0;
  // The KV layer groups, each with its pool; [0] holds every position.
  std::vector<KvGroupConfig> kv_groups;
  int64_t block_size = 16;
  int64_t max_batch_tokens = 512;
  int64_t prefill_chunk = 0;  // 0 = chunked prefill off
  int64_t max_seqs = 64;
  // A policy that evicts (kv_policy.h) bounds what a sequence holds in the
  // pool of group 0 by its sinks, window and step, whatever its length.
  kv::KvPolicy kv_policy;
};

// Most tokens one sequence writes in one step: the prefill chunk, bounded
// by the step budget.
int64_t max_step_tokens(int64_t max_batch_tokens, int64_t prefill_chunk);
// Most blocks of a group with a window that one sequence holds in a step of
// step_tokens: the window before its step plus the step's tokens,
// ceil((window - 1 + step_tokens) / block_size) + 1.
int64_t window_blocks_per_step(int64_t window, int64_t block_size, int64_t step_tokens);

struct Refusal {
  RejectReason reason = RejectReason::kNone;
  std::string message;
};

// Why `num_samples` parallel samples of a prompt of prompt_len tokens, each
// generating up to max_tokens (>= 1), can never run: the prompt fills the
// context (kPromptTooLong), prompt + max_tokens exceeds it
// (kContextExceeded), their KV blocks exceed a group's pool (kKvNeverFits:
// the samples share the prompt's full blocks and own the rest; the last
// sampled token needs no slot; in a group with a window every sample
// decodes at once with a decode step's window), or the prompt exceeds one step with
// chunked prefill off (kPromptTooLong). nullopt when it can. When
// runs_past_context() the context does not bound prompt + max_tokens;
// otherwise a re-rotating policy's refusal says why it did not lift it.
std::optional<Refusal> never_fits(const CapacityLimits& limits, int64_t prompt_len, int64_t max_tokens,
                                  int64_t num_samples);

// The largest max_tokens for which never_fits passes the context and the
// pool checks of the groups without a window (0 when none does): the
// context, or the samples' share of the smallest such pool (unbounded
// under a policy that evicts and re-rotates).
int64_t max_completion_tokens(const CapacityLimits& limits, int64_t prompt_len, int64_t num_samples);

// Whether requests may run past max_model_len: the policy re-rotates and
// the positions it spans, max_blocks(block_size, longest step) blocks,
// fit the context.
bool runs_past_context(const CapacityLimits& limits);

// max_tokens for a request that gives none and may run to the end of the
// context: max_completion_tokens, and under a re-rotating policy (which
// has no end) one model context of output.
int64_t default_completion_tokens(const CapacityLimits& limits, int64_t prompt_len, int64_t num_samples);

}  // namespace tokenmill::sched
