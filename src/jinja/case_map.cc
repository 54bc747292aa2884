// Upper/lower case of the scripts chat templates meet (Latin-1, Latin
// Extended-A, Greek, Cyrillic), so that `|upper`, `.lower()` and the
// case-insensitive sorts agree with Python's str methods on such text.
// Code points outside these blocks keep their case.
#include <cstdint>
#include <string>

#include "jinja/string_util.h"

namespace tokenmill::jinja {
namespace {

// Latin Extended-A pairs: upper case at even code points, except in the two
// runs where it is at odd ones.
bool odd_upper_run(uint32_t cp) { return (cp >= 0x139 && cp <= 0x148) || (cp >= 0x179 && cp <= 0x17E); }

uint32_t upper_of(uint32_t cp) {
  if (cp >= 'a' && cp <= 'z') return cp - 32;
  if (cp < 0x80) return cp;
  if (cp >= 0xE0 && cp <= 0xFE && cp != 0xF7) return cp - 0x20;
  if (cp == 0xFF) return 0x178;
  if (cp >= 0x100 && cp <= 0x17F && cp != 0x138 && cp != 0x149 && cp != 0x17F) {
    const bool is_lower = odd_upper_run(cp) ? (cp % 2 == 0) : (cp % 2 == 1);
    return is_lower ? cp - 1 : cp;
  }
  if (cp == 0x3C2) return 0x3A3;
  if (cp >= 0x3B1 && cp <= 0x3C9) return cp - 0x20;
  if (cp >= 0x430 && cp <= 0x44F) return cp - 0x20;
  if (cp >= 0x450 && cp <= 0x45F) return cp - 0x50;
  return cp;
}

uint32_t lower_of(uint32_t cp) {
  if (cp >= 'A' && cp <= 'Z') return cp + 32;
  if (cp < 0x80) return cp;
  if (cp >= 0xC0 && cp <= 0xDE && cp != 0xD7) return cp + 0x20;
  if (cp == 0x178) return 0xFF;
  if (cp >= 0x100 && cp <= 0x17F && cp != 0x138 && cp != 0x149 && cp != 0x17F) {
    const bool is_upper = odd_upper_run(cp) ? (cp % 2 == 1) : (cp % 2 == 0);
    return is_upper ? cp + 1 : cp;
  }
  if (cp >= 0x391 && cp <= 0x3A9 && cp != 0x3A2) return cp + 0x20;
  if (cp >= 0x410 && cp <= 0x42F) return cp + 0x20;
  if (cp >= 0x400 && cp <= 0x40F) return cp + 0x50;
  return cp;
}

// Maps the 1- and 2-byte UTF-8 sequences (every code point above is below
// U+0800); longer sequences and stray bytes are copied unchanged.
std::string map_case(const std::string& s, uint32_t (*fn)(uint32_t)) {
  std::string out;
  out.reserve(s.size());
  for (size_t n = 0; n < s.size(); ++n) {
    const auto c = static_cast<unsigned char>(s[n]);
    if (c < 0x80) {
      out += static_cast<char>(fn(c));
      continue;
    }
    if ((c & 0xE0) == 0xC0 && n + 1 < s.size() && (static_cast<unsigned char>(s[n + 1]) & 0xC0) == 0x80) {
      const uint32_t cp = fn(((c & 0x1Fu) << 6) | (static_cast<unsigned char>(s[n + 1]) & 0x3Fu));
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
      ++n;
      continue;
    }
    out += s[n];
  }
  return out;
}

}  // namespace

std::string to_upper(const std::string& s) { return map_case(s, upper_of); }
std::string to_lower(const std::string& s) { return map_case(s, lower_of); }

}  // namespace tokenmill::jinja
