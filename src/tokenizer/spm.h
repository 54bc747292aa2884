// SentencePiece-style BPE as llama.cpp runs it for "llama" vocabularies: the
// text is split into UTF-8 characters, then the adjacent pair whose
// concatenation is a token with the highest score is merged, again and again
// (ties: the leftmost pair), with a priority queue. Pieces that end up
// outside the vocabulary fall back to byte tokens <0xXX>.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

#include "tokenizer/vocabulary.h"

namespace tokenmill::tokenizer {

// The token for each byte value: <0xXX>, else the one-byte text, else unk_id
// (kNoToken when there is none: such bytes are dropped).
std::array<int32_t, 256> spm_byte_tokens(const Vocabulary& vocab, int32_t unk_id);

// Appends the tokens of `text` to out. `text` must already be escaped (spaces
// as U+2581, the optional prefix space added). Cost: O(n log n) in the
// number of characters, one hash lookup per candidate pair.
void spm_tokenize(const Vocabulary& vocab, const std::array<int32_t, 256>& byte_tokens, std::string_view text,
                  std::vector<int32_t>& out);

}  // namespace tokenmill::tokenizer
