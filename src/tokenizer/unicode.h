// UTF-8 and byte-level helpers shared by the tokenizers and the incremental
// detokenizer. Pure functions over byte strings; thread-safe; no allocation
// beyond the returned strings.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace tokenmill::tokenizer {

// The number of bytes llama.cpp (and SentencePiece) take as one character when
// splitting text, from the lead byte alone: 1 for ASCII and for stray
// continuation bytes, 2/3/4 for lead bytes. Never 0. The caller clamps it to
// the bytes that remain.
inline size_t utf8_char_length(uint8_t lead) {
  static constexpr uint8_t kLengths[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kLengths[lead >> 4];
}

// Appends the UTF-8 encoding of a code point (<= U+10FFFF) to out.
void append_utf8(std::string& out, char32_t cp);

// Checks the strict UTF-8 sequence that starts at text[0] (no overlongs, no
// surrogates, nothing above U+10FFFF). Returns its length when it is complete
// and valid; 0 when text ends inside a sequence that could still become
// valid; -n when the first n bytes (n >= 1) can never start a valid sequence
// and should be replaced by one U+FFFD. Precondition: !text.empty().
int utf8_check_sequence(std::string_view text);

// True when the whole of text is strict UTF-8.
bool is_valid_utf8(std::string_view text);

// Appends the longest prefix of text that ends on a character boundary to
// out, replacing invalid bytes by U+FFFD, and returns how many bytes of text
// were used; the rest is an incomplete (still possibly valid) sequence of at
// most 3 bytes. With at_end, that rest is replaced by U+FFFD too and all of
// text is used.
size_t append_complete_utf8(std::string_view text, bool at_end, std::string& out);

// GPT-2 byte-level alphabet: every byte maps to one printable code point
// (printable Latin-1 bytes map to themselves, the other 68 to U+0100..U+0143
// in byte order). byte_level_encode maps each byte of raw to its code point,
// in UTF-8. byte_level_decode reverses it; code points outside the alphabet
// are kept as their own UTF-8, so decoding never loses text.
std::string byte_level_encode(std::string_view raw);
std::string byte_level_decode(std::string_view encoded);
// The code point for one byte.
char32_t byte_to_unicode(uint8_t byte);

// SentencePiece whitespace escaping: ' ' <-> U+2581 ("▁").
inline constexpr std::string_view kSpmSpace = "\xE2\x96\x81";
std::string spm_escape_spaces(std::string_view text);
std::string spm_unescape_spaces(std::string_view text);

}  // namespace tokenmill::tokenizer
