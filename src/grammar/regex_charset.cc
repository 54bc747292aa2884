#include "grammar/regex_charset.h"

#include <fmt/format.h>

#include <algorithm>

#include "util/error.h"

namespace tokenmill::grammar {

CharSet CharSet::range(char32_t lo, char32_t hi) {
  CharSet s;
  s.add(lo, hi);
  return s;
}

void CharSet::add(char32_t lo, char32_t hi) {
  if (lo > hi) return;
  auto it = std::lower_bound(ranges_.begin(), ranges_.end(), std::make_pair(lo, lo));
  ranges_.insert(it, {lo, hi});
  // Merge overlapping and adjacent neighbours in one pass; sets stay small.
  std::vector<std::pair<char32_t, char32_t>> merged;
  merged.reserve(ranges_.size());
  for (const auto& r : ranges_) {
    if (!merged.empty() && r.first <= merged.back().second + 1) {
      merged.back().second = std::max(merged.back().second, r.second);
    } else {
      merged.push_back(r);
    }
  }
  ranges_ = std::move(merged);
}

void CharSet::add(const CharSet& other) {
  for (const auto& r : other.ranges_) add(r.first, r.second);
}

CharSet CharSet::complement() const {
  CharSet out;
  char32_t next = 0;
  for (const auto& r : ranges_) {
    if (r.first > next) out.ranges_.push_back({next, r.first - 1});
    next = r.second + 1;
  }
  if (next <= kMaxCodePoint) out.ranges_.push_back({next, kMaxCodePoint});
  return out;
}

CharSet CharSet::intersect(const CharSet& other) const {
  CharSet out;
  size_t i = 0, j = 0;
  while (i < ranges_.size() && j < other.ranges_.size()) {
    const char32_t lo = std::max(ranges_[i].first, other.ranges_[j].first);
    const char32_t hi = std::min(ranges_[i].second, other.ranges_[j].second);
    if (lo <= hi) out.ranges_.push_back({lo, hi});
    if (ranges_[i].second < other.ranges_[j].second) {
      ++i;
    } else {
      ++j;
    }
  }
  return out;
}

bool CharSet::contains(char32_t c) const {
  for (const auto& r : ranges_) {
    if (c >= r.first && c <= r.second) return true;
  }
  return false;
}

std::optional<char32_t> CharSet::single() const {
  if (ranges_.size() == 1 && ranges_[0].first == ranges_[0].second) return ranges_[0].first;
  return std::nullopt;
}

std::u32string decode_utf8(std::string_view text, std::string_view what) {
  std::u32string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    const auto b0 = static_cast<unsigned char>(text[i]);
    int len = 0;
    char32_t cp = 0;
    char32_t min = 0;
    if (b0 < 0x80) {
      len = 1, cp = b0;
    } else if ((b0 & 0xE0) == 0xC0) {
      len = 2, cp = b0 & 0x1F, min = 0x80;
    } else if ((b0 & 0xF0) == 0xE0) {
      len = 3, cp = b0 & 0x0F, min = 0x800;
    } else if ((b0 & 0xF8) == 0xF0) {
      len = 4, cp = b0 & 0x07, min = 0x10000;
    } else {
      fail("{}: invalid UTF-8 at byte {}", what, i);
    }
    if (i + len > text.size()) fail("{}: truncated UTF-8 at byte {}", what, i);
    for (int k = 1; k < len; ++k) {
      const auto b = static_cast<unsigned char>(text[i + k]);
      if ((b & 0xC0) != 0x80) fail("{}: invalid UTF-8 at byte {}", what, i);
      cp = (cp << 6) | (b & 0x3F);
    }
    if (cp < min || cp > kMaxCodePoint || (cp >= 0xD800 && cp <= 0xDFFF)) {
      fail("{}: invalid UTF-8 at byte {}", what, i);
    }
    out.push_back(cp);
    i += len;
  }
  return out;
}

void append_utf8(std::string& out, char32_t c) {
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xC0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xE0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  }
}

namespace {

// Spells one code point for a GBNF literal or class. Everything outside
// printable ASCII is escaped so the grammar text is plain ASCII.
void append_gbnf_char(std::string& out, char32_t c, std::string_view specials) {
  if (c >= 0x20 && c < 0x7F) {
    if (c == '\\' || specials.find(static_cast<char>(c)) != std::string_view::npos) out += '\\';
    out += static_cast<char>(c);
  } else if (c == '\n') {
    out += "\\n";
  } else if (c == '\r') {
    out += "\\r";
  } else if (c == '\t') {
    out += "\\t";
  } else if (c < 0x80) {
    out += fmt::format("\\x{:02X}", static_cast<uint32_t>(c));
  } else if (c < 0x10000) {
    out += fmt::format("\\u{:04X}", static_cast<uint32_t>(c));
  } else {
    out += fmt::format("\\U{:08X}", static_cast<uint32_t>(c));
  }
}

std::string class_text(const CharSet& set, bool negated) {
  std::string out = negated ? "[^" : "[";
  for (const auto& [lo, hi] : set.ranges()) {
    append_gbnf_char(out, lo, "\"]^-[");
    if (hi == lo) continue;
    if (hi != lo + 1) out += '-';
    append_gbnf_char(out, hi, "\"]^-[");
  }
  out += ']';
  return out;
}

}  // namespace

std::string gbnf_literal(std::u32string_view text) {
  std::string out = "\"";
  for (char32_t c : text) append_gbnf_char(out, c, "\"");
  out += '"';
  return out;
}

std::string gbnf_literal_utf8(std::string_view text) { return gbnf_literal(decode_utf8(text, "literal")); }

std::string gbnf_class(const CharSet& set) {
  std::string positive = class_text(set, false);
  const CharSet other = set.complement();
  if (other.empty()) return positive;
  std::string negative = class_text(other, true);
  return negative.size() < positive.size() ? negative : positive;
}

std::string gbnf_set(const CharSet& set) {
  if (auto c = set.single()) return gbnf_literal(std::u32string(1, *c));
  return gbnf_class(set);
}

bool json_raw_char(char32_t c) { return c >= 0x20 && c != '"' && c != '\\'; }

const CharSet& json_raw_chars() {
  static const CharSet raw = [] {
    CharSet s = CharSet::range(0x20, kMaxCodePoint);
    return s.minus(CharSet::of('"')).minus(CharSet::of('\\'));
  }();
  return raw;
}

std::string json_escape(char32_t c) {
  switch (c) {
    case '"': return "\"";
    case '\\': return "\\";
    case '\b': return "b";
    case '\f': return "f";
    case '\n': return "n";
    case '\r': return "r";
    case '\t': return "t";
    default: return fmt::format("u{:04x}", static_cast<uint32_t>(c));
  }
}

void append_json_char(std::u32string& out, char32_t c) {
  if (json_raw_char(c)) {
    out += c;
    return;
  }
  out += U'\\';
  for (char e : json_escape(c)) out += static_cast<char32_t>(e);
}

std::string gbnf_json_set(const CharSet& set) {
  const CharSet raw = set.intersect(json_raw_chars());
  const CharSet special = set.minus(json_raw_chars());  // " \ and U+0000..U+001F
  std::vector<std::string> alts;
  if (!raw.empty()) alts.push_back(gbnf_set(raw));
  if (!special.empty()) {
    CharSet short_forms;          // the letter after the backslash
    CharSet long_low, long_high;  // \u000X and \u001X: the last hex digit
    for (const auto& [lo, hi] : special.ranges()) {
      for (char32_t c = lo; c <= hi; ++c) {
        const std::string e = json_escape(c);
        if (e.size() == 1) {
          short_forms.add(static_cast<char32_t>(e[0]), static_cast<char32_t>(e[0]));
        } else {
          (c < 0x10 ? long_low : long_high).add(static_cast<char32_t>(e[4]), static_cast<char32_t>(e[4]));
        }
      }
    }
    std::vector<std::string> esc;
    if (!short_forms.empty()) esc.push_back(gbnf_set(short_forms));
    std::vector<std::string> hex;
    if (!long_low.empty()) hex.push_back("\"0\" " + gbnf_set(long_low));
    if (!long_high.empty()) hex.push_back("\"1\" " + gbnf_set(long_high));
    if (!hex.empty()) {
      esc.push_back("\"u00\" " + (hex.size() == 1 ? hex[0] : "(" + hex[0] + " | " + hex[1] + ")"));
    }
    std::string body = esc.size() == 1 ? esc[0] : "(" + esc[0] + " | " + esc[1] + ")";
    alts.push_back("\"\\\\\" " + body);
  }
  if (alts.size() == 1) return alts[0];
  return "(" + alts[0] + " | " + alts[1] + ")";
}

}  // namespace tokenmill::grammar
