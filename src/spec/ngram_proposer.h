// Prompt-lookup (n-gram) drafting for speculative decoding: the draft is
// what followed the most recent earlier occurrence of the sequence's last
// n tokens, in its prompt or its output so far. It needs no model, costs a
// scan of the tokens, and pays where the output copies its input (rewrite,
// extract, code edits) or repeats itself.
//
// The draft is a guess, never trusted: the target verifies every token
// (engine/engine_core.cc), so a wrong draft costs only the verification.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "util/error.h"

namespace tokenmill::spec {

struct NgramConfig {
  int32_t max_draft = 4;  // k: tokens proposed at most
  int32_t min_ngram = 1;  // shortest suffix matched
  int32_t max_ngram = 3;  // longest suffix matched (tried first)

  // Throws Error naming the bad field: max_draft in [1, kMaxDraft],
  // 1 <= min_ngram <= max_ngram <= kMaxNgram.
  void validate() const;
};

inline constexpr int32_t kMaxDraft = 16;
inline constexpr int32_t kMaxNgram = 8;

// Up to `max_draft` tokens to follow `tokens` (prompt + output): for n from
// max_ngram down to min_ngram, the latest earlier occurrence of the last n
// tokens that leaves the most tokens after it (up to max_draft), and those
// tokens. Empty when no suffix of those lengths occurs earlier. Cost:
// O(tokens * max_ngram) comparisons at most.
std::vector<int32_t> propose_ngram(std::span<const int32_t> tokens, int32_t max_draft, const NgramConfig& config);

}  // namespace tokenmill::spec
