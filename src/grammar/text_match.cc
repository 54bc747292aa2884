#include "grammar/text_match.h"

#include <algorithm>

#include "grammar/parse_state.h"

namespace tokenmill::grammar {

bool grammar_accepts(const Grammar& grammar, std::string_view text) {
  StackArena arena(grammar);
  ParseState state;
  arena.start(state.tops);
  std::vector<int32_t> scratch;
  if (!feed_bytes(arena, state, text, scratch)) return false;
  return state.left == 0 && std::binary_search(state.tops.begin(), state.tops.end(), StackArena::kBottom);
}

}  // namespace tokenmill::grammar
