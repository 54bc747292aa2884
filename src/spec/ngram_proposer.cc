#include "spec/ngram_proposer.h"

#include <algorithm>

namespace tokenmill::spec {

void NgramConfig::validate() const {
  if (max_draft < 1 || max_draft > kMaxDraft)
    fail("speculative draft length must be in [1, {}], got {}", kMaxDraft, max_draft);
  if (min_ngram < 1 || max_ngram < min_ngram || max_ngram > kMaxNgram)
    fail("n-gram lengths must satisfy 1 <= min ({}) <= max ({}) <= {}", min_ngram, max_ngram, kMaxNgram);
}

std::vector<int32_t> propose_ngram(std::span<const int32_t> tokens, int32_t max_draft, const NgramConfig& config) {
  const int64_t len = static_cast<int64_t>(tokens.size());
  if (max_draft <= 0) return {};
  for (int64_t n = std::min<int64_t>(config.max_ngram, len - 1); n >= config.min_ngram; --n) {
    const std::span<const int32_t> suffix = tokens.subspan(static_cast<size_t>(len - n));
    // Latest occurrence first (it ends at `end`, exclusive, before len); one
    // close to the end may leave fewer than max_draft tokens after it, so
    // the latest one that leaves the most wins.
    int64_t best_end = -1, best_count = 0;
    for (int64_t end = len - 1; end >= n && best_count < max_draft; --end) {
      if (!std::equal(suffix.begin(), suffix.end(), tokens.begin() + (end - n))) continue;
      const int64_t count = std::min<int64_t>(max_draft, len - end);
      if (count > best_count) best_end = end, best_count = count;
    }
    if (best_count > 0) return {tokens.begin() + best_end, tokens.begin() + best_end + best_count};
  }
  return {};
}

}  // namespace tokenmill::spec
