#include "sched/admission.h"

#include <fmt/format.h>

#include <algorithm>

#include "util/int_math.h"

namespace tokenmill::sched {

int64_t max_step_tokens(int64_t max_batch_tokens, int64_t prefill_chunk) {
  return prefill_chunk > 0 ? std::min(prefill_chunk, max_batch_tokens) : max_batch_tokens;
}

int64_t window_blocks_per_step(int64_t sliding_window, int64_t block_size, int64_t step_tokens) {
  return ceil_div(sliding_window - 1 + step_tokens, block_size) + 1;
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
int64_t window_pool_blocks(const CapacityLimits& l, int64_t total, int64_t num_samples) {
  const int64_t per_sample =
      std::min(ceil_div(total - 1, l.block_size), window_blocks_per_step(l.sliding_window, l.block_size, 1));
  const int64_t longest_step = window_blocks_per_step(l.sliding_window, l.block_size,
                                                      max_step_tokens(l.max_batch_tokens, l.prefill_chunk));
  return std::max(num_samples * per_sample, longest_step);
}

}  // namespace

std::optional<Refusal> never_fits(const CapacityLimits& l, int64_t prompt_len, int64_t max_tokens,
                                  int64_t num_samples) {
  const int64_t total = prompt_len + max_tokens;
  if (l.max_model_len > 0 && prompt_len >= l.max_model_len) {
    return Refusal{RejectReason::kPromptTooLong,
                   fmt::format("the prompt ({} tokens) leaves no room in the model context of {} tokens", prompt_len,
                               l.max_model_len)};
  }
  if (l.max_model_len > 0 && total > l.max_model_len) {
    return Refusal{RejectReason::kContextExceeded,
                   fmt::format("prompt ({} tokens) + max_tokens ({}) = {} exceeds the model context of {} tokens",
                               prompt_len, max_tokens, total, l.max_model_len)};
  }
  const int64_t blocks = pool_blocks(l, prompt_len, total, num_samples);
  if (blocks > l.num_blocks) {
    return Refusal{RejectReason::kKvNeverFits,
                   fmt::format("prompt ({} tokens) + max_tokens ({}) needs {} KV blocks, but the whole cache has "
                               "{} blocks ({} tokens)",
                               prompt_len, max_tokens, blocks, l.num_blocks, l.num_blocks * l.block_size)};
  }
  if (l.num_window_blocks > 0 && num_samples > 1) {
    const int64_t window = window_pool_blocks(l, total, num_samples);
    if (window > l.num_window_blocks) {
      return Refusal{RejectReason::kKvNeverFits,
                     fmt::format("{} parallel samples need {} sliding-window KV blocks, but the window pool has {}",
                                 num_samples, window, l.num_window_blocks)};
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
  const int64_t shared = std::min(prompt_len / l.block_size, l.num_blocks);
  const int64_t per_sample = (l.num_blocks - shared) / std::max<int64_t>(num_samples, 1);
  int64_t total = (shared + per_sample) * l.block_size + 1;
  if (l.max_model_len > 0) total = std::min(total, l.max_model_len);
  return std::max<int64_t>(0, total - prompt_len);
}

}  // namespace tokenmill::sched
