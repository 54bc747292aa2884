// The expensive half of constrained decoding: walking the vocabulary trie
// with a parse state to find every token it accepts. Each trie edge is one
// byte fed to the parse state; walk states are interned and their byte
// transitions cached, so the common case (a string body, where most bytes
// lead back to the same state) costs one hash lookup per trie node.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "grammar/compiled_grammar.h"
#include "grammar/parse_state.h"

namespace tokenmill::grammar {

// Context keys (matcher.h): stack positions from the top down, then one of
// these markers.
inline constexpr uint32_t kKeyCut = 0xFFFFFFFFu;     // stack goes on below: cut here
inline constexpr uint32_t kKeyBottom = 0xFFFFFFFEu;  // the whole stack

// Tokens a context decides alone go to out.accepted; tokens whose bytes run
// past the cut go to out.uncertain unless some path accepts them.
void compute_context_mask(const Grammar& grammar, const TokenVocab& vocab, std::span<const uint32_t> key,
                          ContextMask& out);

// Every token the full state accepts (no cut, no cache): for states inside
// an unfinished UTF-8 character. bits: [vocab.mask_words()], OR-ed into.
void compute_state_mask(const Grammar& grammar, const TokenVocab& vocab, const StackArena& arena,
                        const ParseState& state, std::span<uint32_t> bits);

inline void set_bit(std::span<uint32_t> bits, int32_t id) {
  bits[static_cast<size_t>(id) >> 5] |= 1u << (static_cast<uint32_t>(id) & 31);
}
inline bool test_bit(std::span<const uint32_t> bits, int32_t id) {
  return (bits[static_cast<size_t>(id) >> 5] >> (static_cast<uint32_t>(id) & 31)) & 1u;
}

}  // namespace tokenmill::grammar
