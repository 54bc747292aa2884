#include "grammar/parse_state.h"

#include <algorithm>

#include "grammar/utf8.h"

namespace tokenmill::grammar {

namespace {

// Whether some stack can still take a character that starts with the
// bytes fed so far: its code points lie in [cp << 6k, (cp << 6k) | (2^6k - 1)]
// with k continuation bytes to come.
bool partial_feasible(const StackArena& arena, const ParseState& state) {
  static constexpr uint32_t kMinForLength[] = {0, 0, 0x80, 0x800, 0x10000};  // shorter forms are overlong
  const int shift = 6 * state.left;
  const uint32_t lo = std::max(state.cp << shift, kMinForLength[state.length]);
  const uint32_t hi = std::min(state.cp << shift | ((1u << shift) - 1), 0x10FFFFu);
  if (lo > hi) return false;
  for (int32_t top : state.tops) {
    if (top >= 0 && arena.top_accepts_any(top, lo, hi)) return true;
  }
  return false;
}

}  // namespace

bool feed_byte(StackArena& arena, ParseState& state, uint8_t byte, std::vector<int32_t>& scratch) {
  if (state.left == 0) {
    const int extra = utf8_continuation_bytes(byte);
    if (extra < 0) return false;
    if (extra > 0) {
      state.cp = byte & (0x3Fu >> extra);
      state.left = static_cast<int8_t>(extra);
      state.length = static_cast<int8_t>(extra + 1);
      return partial_feasible(arena, state);
    }
    state.cp = byte;
    state.length = 1;
  } else {
    if ((byte & 0xC0) != 0x80) return false;
    state.cp = (state.cp << 6) | (byte & 0x3Fu);
    if (--state.left > 0) return partial_feasible(arena, state);
    if (!utf8_scalar_ok(state.cp, state.length)) return false;
  }
  arena.advance(state.tops, state.cp, scratch);
  state.tops.swap(scratch);
  state.cp = 0;
  state.length = 0;
  return !state.tops.empty();
}

bool feed_bytes(StackArena& arena, ParseState& state, std::string_view bytes, std::vector<int32_t>& scratch) {
  for (char c : bytes) {
    if (!feed_byte(arena, state, static_cast<uint8_t>(c), scratch)) return false;
  }
  return true;
}

}  // namespace tokenmill::grammar
