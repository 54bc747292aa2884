#include "sched/admission.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "util/int_math.h"

namespace tokenmill::sched {

int64_t max_step_tokens(int64_t max_batch_tokens, int64_t prefill_chunk) {
  return prefill_chunk > 0 ? std::min(prefill_chunk, max_batch_tokens) : max_batch_tokens;
}

int64_t window_blocks_per_step(int64_t window, int64_t block_size, int64_t step_tokens) {
  return ceil_div(window - 1 + step_tokens, block_size) + 1;
}

namespace {

// Blocks of the full pool: the samples share the prompt's full blocks and
// own the rest; the last sampled token never enters the cache.
int64_t pool_blocks(const CapacityLimits& l, int64_t prompt_len, int64_t total, int64_t num_samples) {
  const int64_t shared = prompt_len / l.block_size;
  return shared + num_samples * (ceil_div(total - 1, l.block_size) - shared);
}

// Window-pool blocks when every sample decodes at once, each holding up to a
// decode step's window; never less than one sequence's longest step.
int64_t window_pool_blocks(const CapacityLimits& l, int64_t window, int64_t total, int64_t num_samples) {
  const int64_t per_sample =
      std::min(ceil_div(total - 1, l.block_size), window_blocks_per_step(window, l.block_size, 1));
  const int64_t longest_step =
      window_blocks_per_step(window, l.block_size, max_step_tokens(l.max_batch_tokens, l.prefill_chunk));
  return std::max(num_samples * per_sample, longest_step);
}

}  // namespace

std::optional<Refusal> never_fits(const CapacityLimits& l, int64_t prompt_len, int64_t max_tokens,
                                  int64_t num_samples) {
  const int64_t total = prompt_len + max_tokens;
  const int64_t step = max_step_tokens(l.max_batch_tokens, l.prefill_chunk);
  if (!runs_past_context(l)) {
    // Why a re-rotating policy does not lift the limit here.
    const std::string why =
        l.kv_policy.bounds_positions()
            ? fmt::format(
                  " (the KV policy {} spans up to {} positions with steps of {} tokens, more than the context; "
                  "a smaller window, budget or prefill chunk lets requests run past it)",
                  l.kv_policy.describe(), l.kv_policy.max_blocks(l.block_size, step) * l.block_size, step)
            : "";
    if (l.max_model_len > 0 && prompt_len >= l.max_model_len) {
      return Refusal{RejectReason::kPromptTooLong,
                     fmt::format("the prompt ({} tokens) leaves no room in the model context of {} tokens{}",
                                 prompt_len, l.max_model_len, why)};
    }
    if (l.max_model_len > 0 && total > l.max_model_len) {
      return Refusal{RejectReason::kContextExceeded,
                     fmt::format("prompt ({} tokens) + max_tokens ({}) = {} exceeds the model context of {} tokens{}",
                                 prompt_len, max_tokens, total, l.max_model_len, why)};
    }
  }
  for (const KvGroupConfig& g : l.kv_groups) {
    if (g.window == 0) {
      int64_t blocks = pool_blocks(l, prompt_len, total, num_samples);
      if (l.kv_policy.evicts()) blocks = std::min(blocks, num_samples * l.kv_policy.max_blocks(l.block_size, step));
      if (blocks > g.num_blocks) {
        return Refusal{RejectReason::kKvNeverFits,
                       fmt::format("prompt ({} tokens) + max_tokens ({}) needs {} KV blocks, but the whole cache has "
                                   "{} blocks ({} tokens)",
                                   prompt_len, max_tokens, blocks, g.num_blocks, int64_t{g.num_blocks} * l.block_size)};
      }
    } else if (num_samples > 1) {
      const int64_t blocks = window_pool_blocks(l, g.window, total, num_samples);
      if (blocks > g.num_blocks) {
        return Refusal{RejectReason::kKvNeverFits,
                       fmt::format("{} parallel samples need {} sliding-window KV blocks, but the window pool has {}",
                                   num_samples, blocks, g.num_blocks)};
      }
    }
  }
  if (l.prefill_chunk == 0 && prompt_len > l.max_batch_tokens) {
    return Refusal{RejectReason::kPromptTooLong,
                   fmt::format("prompt ({} tokens) exceeds max_batch_tokens ({}) and chunked prefill is off",
                               prompt_len, l.max_batch_tokens)};
  }
  return std::nullopt;
}

int64_t max_completion_tokens(const CapacityLimits& l, int64_t prompt_len, int64_t num_samples) {
  // The inverse of pool_blocks: each sample owns an equal share of what
  // the shared prompt blocks leave, plus the one token that needs no slot.
  int64_t total = l.max_model_len > 0 && !runs_past_context(l) ? l.max_model_len : INT64_MAX;
  for (const KvGroupConfig& g : l.kv_groups) {
    if (g.window > 0 || l.kv_policy.evicts()) continue;  // bounded by the window, not the length
    const int64_t shared = std::min<int64_t>(prompt_len / l.block_size, g.num_blocks);
    const int64_t per_sample = (g.num_blocks - shared) / std::max<int64_t>(num_samples, 1);
    total = std::min(total, (shared + per_sample) * l.block_size + 1);
  }
  return std::max<int64_t>(0, total - prompt_len);
}

bool runs_past_context(const CapacityLimits& l) {
  if (!l.kv_policy.bounds_positions()) return false;
  const int64_t step = max_step_tokens(l.max_batch_tokens, l.prefill_chunk);
  return l.max_model_len == 0 || l.kv_policy.max_blocks(l.block_size, step) * l.block_size <= l.max_model_len;
}

int64_t default_completion_tokens(const CapacityLimits& l, int64_t prompt_len, int64_t num_samples) {
  const int64_t room = max_completion_tokens(l, prompt_len, num_samples);
  if (runs_past_context(l) && l.max_model_len > 0) return std::min(room, l.max_model_len);
  return room;
}

}  // namespace tokenmill::sched
