// Byte-level BPE as llama.cpp runs it for "gpt2" vocabularies: each
// pre-tokenized word (already mapped to the GPT-2 byte alphabet) is split
// into characters, then the adjacent pair with the lowest merge rank is
// merged until no listed merge applies (ties: the leftmost pair).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/vocabulary.h"

namespace tokenmill::tokenizer {

// Merge ranks from tokenizer.ggml.merges ("left right", rank = index).
class BpeMerges {
 public:
  BpeMerges() = default;
  // Lines without a space after the first character are ignored; for a
  // repeated pair the first (lowest) rank counts, as in llama.cpp.
  explicit BpeMerges(const std::vector<std::string>& lines);

  // The rank of merging left with right, or -1 when not listed.
  int32_t rank(std::string_view left, std::string_view right) const;
  size_t size() const { return ranks_.size(); }

 private:
  StringMap<int32_t> ranks_;  // key: "left right", exactly the merge line
};

// Appends the tokens of one byte-level-encoded word to out. With
// ignore_merges (llama3), a word that is a token as a whole is emitted as
// that token. Pieces that end up outside the vocabulary are emitted byte by
// byte where single-byte tokens exist, and dropped otherwise (llama.cpp's
// behaviour; byte-level vocabularies have every byte, so it does not happen).
void bpe_tokenize_word(const Vocabulary& vocab, const BpeMerges& merges, std::string_view word, bool ignore_merges,
                       std::vector<int32_t>& out);

}  // namespace tokenmill::tokenizer
