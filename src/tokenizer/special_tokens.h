// Splitting text on the texts of special tokens (control, user-defined,
// unknown) before the model's own algorithm runs, exactly as llama.cpp does:
// the tokens are taken longest text first (ties: lower id first), and each
// one splits every remaining raw-text fragment at its leftmost
// non-overlapping occurrences. (This differs from a leftmost-longest scan
// when two special texts overlap, which is why it is simulated faithfully.)
//
// Occurrences are found with one trie walk per text position, so the cost
// does not grow with the number of special tokens (Gemma has 6414).
// Immutable after construction; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/vocabulary.h"

namespace tokenmill::tokenizer {

// A piece of the input: raw text [begin, end) when token == kNoToken,
// otherwise the special token that covers [begin, end).
struct Fragment {
  int32_t token = kNoToken;
  size_t begin = 0;
  size_t end = 0;
};

class SpecialTokenMatcher {
 public:
  SpecialTokenMatcher() = default;
  // ids: the tokens to match; those with empty text are ignored.
  SpecialTokenMatcher(const Vocabulary& vocab, std::vector<int32_t> ids);

  bool empty() const { return order_.empty(); }
  // The fragments of text in order; raw fragments are never empty. An empty
  // text gives no fragments.
  std::vector<Fragment> split(std::string_view text) const;

 private:
  // Per rank: whether the token's text occurs anywhere in `text`.
  std::vector<bool> ranks_present(std::string_view text) const;

  std::vector<int32_t> order_;      // token ids, longest text first
  std::vector<std::string> texts_;  // text per rank
  // Trie over the texts: edge (node << 8 | byte) -> child; node 0 is the root.
  std::unordered_map<uint64_t, int32_t> edges_;
  std::vector<int32_t> terminal_rank_;  // per node: rank ending here, or -1
  bool first_byte_[256] = {};
};

}  // namespace tokenmill::tokenizer
