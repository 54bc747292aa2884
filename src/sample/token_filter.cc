#include "sample/token_filter.h"

#include <algorithm>

namespace tokenmill::sample {

TokenFilter::TokenFilter(const SamplingParams& params, std::span<const int32_t> end_ids, int32_t vocab_size)
    : min_tokens_(params.min_tokens), bad_words_(params.bad_words_ids) {
  if (!params.allowed_token_ids.empty()) {
    allowed_.assign((static_cast<size_t>(vocab_size) + 31) / 32, 0u);
    for (int32_t id : params.allowed_token_ids) set_mask_bit(allowed_, id, true);
  }
  if (min_tokens_ > 0) {
    min_token_bans_.assign(end_ids.begin(), end_ids.end());
    min_token_bans_.insert(min_token_bans_.end(), params.stop_token_ids.begin(), params.stop_token_ids.end());
    std::erase_if(min_token_bans_, [vocab_size](int32_t id) { return id < 0 || id >= vocab_size; });
  }
}

void TokenFilter::apply(std::span<const int32_t> output, std::span<uint32_t> mask) const {
  if (!allowed_.empty()) {
    const size_t n = std::min(mask.size(), allowed_.size());
    for (size_t w = 0; w < n; ++w) mask[w] &= allowed_[w];
  }
  if (static_cast<int64_t>(output.size()) < min_tokens_) {
    for (int32_t id : min_token_bans_) set_mask_bit(mask, id, false);
  }
  for (const std::vector<int32_t>& word : bad_words_) {
    const size_t prefix = word.size() - 1;
    if (output.size() < prefix) continue;
    if (std::equal(word.begin(), word.end() - 1, output.end() - static_cast<std::ptrdiff_t>(prefix)))
      set_mask_bit(mask, word.back(), false);
  }
}

}  // namespace tokenmill::sample
