// UTF-8 decoding for the grammar code: strict (no overlong forms, no
// surrogates, nothing past U+10FFFF), since a grammar over code points must
// agree with what Python's json and jsonschema accept.
#pragma once
#include <cstdint>
#include <optional>
#include <string_view>

namespace tokenmill::grammar {

// Decodes the code point at text[i], advancing i past it; nullopt (i
// unchanged) on an invalid or truncated sequence.
std::optional<uint32_t> decode_utf8(std::string_view text, size_t& i);

// The number of continuation bytes a lead byte announces (0 for ASCII), or
// -1 for a byte that cannot start a character.
int utf8_continuation_bytes(uint8_t lead);

// True when cp is a valid scalar value for a sequence of `length` bytes
// (not overlong, not a surrogate, at most U+10FFFF).
bool utf8_scalar_ok(uint32_t cp, int length);

}  // namespace tokenmill::grammar
