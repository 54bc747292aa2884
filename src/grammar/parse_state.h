// Where a text stands in a grammar: the live expanded stacks and the bytes
// of an unfinished UTF-8 character. Grammars match code points, tokens are
// bytes: a token may end inside a character, which the next token finishes.
#pragma once
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "grammar/stack_arena.h"

namespace tokenmill::grammar {

struct ParseState {
  std::vector<int32_t> tops;  // sorted, unique
  uint32_t cp = 0;            // the unfinished character's bits so far
  int8_t left = 0;            // continuation bytes still to come
  int8_t length = 0;          // bytes of the unfinished character
  bool operator==(const ParseState&) const = default;
  bool dead() const { return tops.empty(); }
};

// Feeds one byte. Returns false (state undefined) when no stack survives or
// the bytes are not valid UTF-8. `scratch` is reused between calls.
bool feed_byte(StackArena& arena, ParseState& state, uint8_t byte, std::vector<int32_t>& scratch);

// Feeds every byte; false as feed_byte.
bool feed_bytes(StackArena& arena, ParseState& state, std::string_view bytes, std::vector<int32_t>& scratch);

}  // namespace tokenmill::grammar
