// Code point sets and the GBNF text that spells them, shared by the regex
// and JSON Schema converters: literal and class escaping, and the encoding
// of characters as they must appear inside a JSON string literal.
// Thread-safety: values and pure functions.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tokenmill::grammar {

inline constexpr char32_t kMaxCodePoint = 0x10FFFF;

// A set of code points as sorted, disjoint, non-adjacent inclusive ranges.
class CharSet {
 public:
  CharSet() = default;
  static CharSet of(char32_t c) { return range(c, c); }
  static CharSet range(char32_t lo, char32_t hi);
  static CharSet all() { return range(0, kMaxCodePoint); }

  void add(char32_t lo, char32_t hi);
  void add(const CharSet& other);
  CharSet complement() const;  // within [0, kMaxCodePoint]
  CharSet intersect(const CharSet& other) const;
  CharSet minus(const CharSet& other) const { return intersect(other.complement()); }

  bool empty() const { return ranges_.empty(); }
  bool contains(char32_t c) const;
  std::optional<char32_t> single() const;
  const std::vector<std::pair<char32_t, char32_t>>& ranges() const { return ranges_; }
  bool operator==(const CharSet&) const = default;

 private:
  std::vector<std::pair<char32_t, char32_t>> ranges_;
};

// Strict UTF-8 (no surrogates, no overlongs); throws tokenmill::Error
// naming `what` and the byte offset on anything else.
std::u32string decode_utf8(std::string_view text, std::string_view what);
void append_utf8(std::string& out, char32_t c);

// `"..."`: a GBNF literal matching exactly `text`.
std::string gbnf_literal(std::u32string_view text);
// The same for UTF-8 text that is known to be valid (our own JSON dumps).
std::string gbnf_literal_utf8(std::string_view text);
// `[...]` or `[^...]`, whichever is shorter. Precondition: !set.empty().
std::string gbnf_class(const CharSet& set);
// A literal for a single code point, a class otherwise.
std::string gbnf_set(const CharSet& set);

// JSON strings: the characters that may appear unescaped, and the one
// escape we emit for each other character (\" \\ \b \f \n \r \t or \u00XX).
bool json_raw_char(char32_t c);
const CharSet& json_raw_chars();
std::string json_escape(char32_t c);  // without the leading backslash
// The JSON text of `c` inside a string: the character itself or its escape.
void append_json_char(std::u32string& out, char32_t c);

// An expression matching the JSON-string text of any character in `set`
// (raw where JSON allows it, else its escape); deterministic: raw characters
// and the backslash branch start differently. Precondition: !set.empty().
std::string gbnf_json_set(const CharSet& set);

}  // namespace tokenmill::grammar
