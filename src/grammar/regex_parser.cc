#include "grammar/regex_parser.h"

#include <algorithm>
#include <cctype>
#include <string>

#include "util/error.h"

namespace tokenmill::grammar {
namespace {

// Group nesting; deeper expressions are refused before they can exhaust the
// stack of this parser or of the GBNF parser that reads our output.
constexpr int kMaxGroupNesting = 64;

CharSet ascii_word() {
  CharSet s = CharSet::range('a', 'z');
  s.add('A', 'Z');
  s.add('0', '9');
  s.add('_', '_');
  return s;
}

CharSet ascii_space() {
  CharSet s = CharSet::range('\t', '\r');  // \t \n \v \f \r
  s.add(' ', ' ');
  return s;
}

// Everything either engine may count as white space (Python: str.isspace;
// ECMAScript adds U+FEFF).
CharSet any_space() {
  CharSet s = ascii_space();
  s.add(0x1C, 0x1F);
  for (char32_t c : {0x85, 0xA0, 0x1680, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000, 0xFEFF}) s.add(c, c);
  s.add(0x2000, 0x200A);
  return s;
}

CharSet non_ascii() { return CharSet::range(0x80, kMaxCodePoint); }

// A class escape as two sets: `sure` holds only characters both engines
// match (used in positive classes), `maybe` every character either engine
// might match (complemented in negated classes).
struct ClassEscape {
  CharSet sure;
  CharSet maybe;
};

std::optional<ClassEscape> class_escape(char32_t c) {
  CharSet digit = CharSet::range('0', '9');
  CharSet digit_maybe = digit;
  digit_maybe.add(non_ascii());
  CharSet word_maybe = ascii_word();
  word_maybe.add(non_ascii());
  switch (c) {
    case 'd': return ClassEscape{digit, digit_maybe};
    case 'D': return ClassEscape{digit_maybe.complement(), digit.complement()};
    case 'w': return ClassEscape{ascii_word(), word_maybe};
    case 'W': return ClassEscape{word_maybe.complement(), ascii_word().complement()};
    case 's': return ClassEscape{ascii_space(), any_space()};
    case 'S': return ClassEscape{any_space().complement(), ascii_space().complement()};
    default: return std::nullopt;
  }
}

class Parser {
 public:
  Parser(std::u32string text, const GrammarLimits& limits, const Deadline& deadline)
      : s_(std::move(text)), limits_(limits), deadline_(deadline) {}

  RegexTree parse() {
    while (true) {
      RegexBranch branch;
      if (peek('^')) ++pos_, branch.anchored_start = true;
      branch.node = parse_seq(0, &branch.anchored_end);
      tree_.branches.push_back(branch);
      if (pos_ >= s_.size()) break;
      if (s_[pos_] != '|') error("unmatched ')'", pos_);
      ++pos_;
    }
    return std::move(tree_);
  }

 private:
  [[noreturn]] void error(std::string_view what, size_t at) const { fail("regex: {} at offset {}", what, at); }
  bool peek(char32_t c) const { return pos_ < s_.size() && s_[pos_] == c; }

  uint32_t add(RegexNode node) {
    if (tree_.nodes.size() >= limits_.max_symbols) {
      fail("regex: more than max_symbols ({}) nodes; simplify the expression", limits_.max_symbols);
    }
    if (tree_.nodes.size() % 256 == 0) deadline_.check("regex");
    return tree_.add(std::move(node));
  }
  uint32_t add_set(CharSet set, size_t at) {
    if (set.empty()) error("character class matches nothing", at);
    return add(RegexNode{RegexKind::kSet, std::move(set), {}, 0, 0});
  }

  uint32_t parse_alt(int depth) {
    std::vector<uint32_t> alts{parse_seq(depth, nullptr)};
    while (peek('|')) {
      ++pos_;
      alts.push_back(parse_seq(depth, nullptr));
    }
    if (alts.size() == 1) return alts[0];
    return add(RegexNode{RegexKind::kAlt, {}, std::move(alts), 0, 0});
  }

  // A concatenation up to `|`, `)` or the end. `anchored_end` is non-null
  // only for a top-level alternative, the one place `$` is accepted.
  uint32_t parse_seq(int depth, bool* anchored_end) {
    std::vector<uint32_t> items;
    while (pos_ < s_.size() && s_[pos_] != '|' && s_[pos_] != ')') {
      const size_t at = pos_;
      if (s_[pos_] == '$') {
        ++pos_;
        if (anchored_end != nullptr && (pos_ == s_.size() || s_[pos_] == '|')) {
          *anchored_end = true;
          break;
        }
        error("'$' is supported only at the end of the expression or of a top-level alternative", at);
      }
      if (s_[pos_] == '^')
        error("'^' is supported only at the start of the expression or of a top-level alternative", at);
      uint32_t atom = parse_atom(depth);
      items.push_back(parse_quantifiers(atom));
    }
    if (items.empty()) return add(RegexNode{});
    if (items.size() == 1) return items[0];
    return add(RegexNode{RegexKind::kSeq, {}, std::move(items), 0, 0});
  }

  uint32_t parse_atom(int depth) {
    const size_t at = pos_;
    const char32_t c = s_[pos_++];
    switch (c) {
      case '(': return parse_group(depth, at);
      case '[': return parse_class(at);
      case '.': {
        CharSet dot = CharSet::all();
        for (char32_t t : {U'\n', U'\r', U'\u2028', U'\u2029'}) dot = dot.minus(CharSet::of(t));
        return add_set(dot, at);
      }
      case '\\': {
        if (auto esc = parse_escape(false)) return add_set(*esc, at);
        error("unsupported escape", at);
      }
      case '*':
      case '+':
      case '?': error("nothing to repeat", at);
      case '{': error("'{' is not a quantifier here; write \\{ for a literal brace", at);
      default: return add_set(CharSet::of(c), at);
    }
  }

  uint32_t parse_group(int depth, size_t at) {
    if (depth + 1 > kMaxGroupNesting) error("groups nested deeper than 64", at);
    if (peek('?')) {
      if (pos_ + 1 < s_.size() && s_[pos_ + 1] == ':') {
        pos_ += 2;
      } else {
        const char32_t k = pos_ + 1 < s_.size() ? s_[pos_ + 1] : 0;
        if (k == '=' || k == '!') error("lookahead is not supported", at);
        if (k == '<' && pos_ + 2 < s_.size() && (s_[pos_ + 2] == '=' || s_[pos_ + 2] == '!')) {
          error("lookbehind is not supported", at);
        }
        if (k == '<' || k == 'P') error("named groups are not supported; use (?:...)", at);
        error("inline flags and other (?...) groups are not supported", at);
      }
    }
    const uint32_t inner = parse_alt(depth + 1);
    if (!peek(')')) error("missing ')'", at);
    ++pos_;
    return inner;
  }

  // After '[': a class with ranges, escapes and optional negation.
  uint32_t parse_class(size_t at) {
    const bool negated = peek('^');
    if (negated) ++pos_;
    if (peek(']')) error("']' first in a class means different things to different engines; escape it as \\]", pos_);
    CharSet sure, maybe;
    while (!peek(']')) {
      if (pos_ >= s_.size()) error("unterminated character class", at);
      const size_t item_at = pos_;
      std::optional<char32_t> lo = parse_class_atom(sure, maybe);
      if (!lo || !peek('-') || pos_ + 1 >= s_.size() || s_[pos_ + 1] == ']') {
        if (lo) sure.add(*lo, *lo), maybe.add(*lo, *lo);
        continue;
      }
      ++pos_;  // '-'
      std::optional<char32_t> hi = parse_class_atom(sure, maybe);
      if (!hi) error("a class escape cannot end a range", item_at);
      if (*hi < *lo) error("bad character range", item_at);
      sure.add(*lo, *hi);
      maybe.add(*lo, *hi);
    }
    ++pos_;  // ']'
    return add_set(negated ? maybe.complement() : sure, at);
  }

  // One class member: returns the character, or adds a class escape's sets
  // and returns nullopt.
  std::optional<char32_t> parse_class_atom(CharSet& sure, CharSet& maybe) {
    const size_t at = pos_;
    const char32_t c = s_[pos_++];
    if (c != '\\') return c;
    if (pos_ < s_.size()) {
      if (auto esc = class_escape(s_[pos_])) {
        ++pos_;
        sure.add(esc->sure);
        maybe.add(esc->maybe);
        return std::nullopt;
      }
      if (s_[pos_] == 'b') return ++pos_, U'\b';
    }
    auto single = parse_escape(true);
    if (!single) error("unsupported escape", at);
    return *single->single();
  }

  // After '\\' (already consumed): the set an escape stands for outside a
  // class, or a single character inside one (in_class: class escapes are
  // handled by the caller). nullopt: not supported.
  std::optional<CharSet> parse_escape(bool in_class) {
    const size_t at = pos_ - 1;
    if (pos_ >= s_.size()) error("trailing backslash", at);
    const char32_t c = s_[pos_++];
    if (!in_class) {
      if (auto esc = class_escape(c)) return esc->sure;
    }
    switch (c) {
      case 'n': return CharSet::of('\n');
      case 't': return CharSet::of('\t');
      case 'r': return CharSet::of('\r');
      case 'f': return CharSet::of('\f');
      case 'v': return CharSet::of('\v');
      case '0':
        if (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') error("octal escapes are not supported", at);
        return CharSet::of(0);
      case 'x': return CharSet::of(parse_hex(2, at));
      case 'u': return CharSet::of(parse_hex(4, at));
      case 'b': error("word boundaries (\\b) are not supported", at);
      case 'B': error("\\B is not supported", at);
      default: break;
    }
    if (c >= '1' && c <= '9') error("backreferences are not supported", at);
    if (c < 0x80 && std::isalnum(static_cast<int>(c))) error(fmt::format("escape \\{} is not supported", char(c)), at);
    return CharSet::of(c);  // an escaped punctuation character stands for itself
  }

  char32_t parse_hex(int digits, size_t at) {
    char32_t v = 0;
    for (int i = 0; i < digits; ++i) {
      if (pos_ >= s_.size() || !std::isxdigit(static_cast<int>(s_[pos_] < 0x80 ? s_[pos_] : 0))) {
        error(fmt::format("expected {} hex digits", digits), at);
      }
      const char32_t h = s_[pos_++];
      v = v * 16 + (h <= '9' ? h - '0' : (h | 0x20) - 'a' + 10);
    }
    if (v >= 0xD800 && v <= 0xDFFF) error("surrogate code points are not supported", at);
    return v;
  }

  uint32_t parse_quantifiers(uint32_t atom) {
    if (pos_ >= s_.size()) return atom;
    int min = 0, max = 0;
    switch (s_[pos_]) {
      case '*': min = 0, max = kUnbounded, ++pos_; break;
      case '+': min = 1, max = kUnbounded, ++pos_; break;
      case '?': min = 0, max = 1, ++pos_; break;
      case '{': parse_braces(min, max); break;
      default: return atom;
    }
    if (peek('?')) {
      ++pos_;  // lazy: the same language
    } else if (peek('+')) {
      error("possessive quantifiers are not supported", pos_);
    }
    if (pos_ < s_.size() && (s_[pos_] == '*' || s_[pos_] == '+' || s_[pos_] == '?' || s_[pos_] == '{')) {
      error("multiple repeat", pos_);
    }
    return add(RegexNode{RegexKind::kRepeat, {}, {atom}, min, max});
  }

  // {m}, {m,} or {m,n}; anything else after '{' is refused (Python and
  // ECMAScript read it as literal text, but silently so).
  void parse_braces(int& min, int& max) {
    const size_t at = pos_++;
    auto number = [&]() -> int64_t {
      int64_t v = -1;
      while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') {
        v = std::min<int64_t>((v < 0 ? 0 : v) * 10 + (s_[pos_++] - '0'), int64_t{1} << 40);
      }
      return v;
    };
    const int64_t m = number();
    int64_t n = m;
    if (m < 0) error("'{' is not a quantifier here; write \\{ for a literal brace", at);
    if (peek(',')) {
      ++pos_;
      n = number();
      if (n < 0) n = kUnbounded;
    }
    if (!peek('}')) error("'{' is not a quantifier here; write \\{ for a literal brace", at);
    ++pos_;
    const int64_t limit = limits_.max_repetition;
    if (m > limit || n > limit) {
      fail("regex: repetition count {} at offset {} exceeds max_repetition ({})", std::max(m, n), at, limit);
    }
    if (n != kUnbounded && n < m) error("repetition {m,n} with n < m", at);
    min = static_cast<int>(m);
    max = static_cast<int>(n);
  }

  std::u32string s_;
  size_t pos_ = 0;
  const GrammarLimits& limits_;
  const Deadline& deadline_;
  RegexTree tree_;
};

}  // namespace

uint32_t RegexTree::add(RegexNode node) {
  nodes.push_back(std::move(node));
  return static_cast<uint32_t>(nodes.size() - 1);
}

RegexTree parse_regex(std::string_view regex, const GrammarLimits& limits, const Deadline& deadline) {
  if (regex.size() > limits.max_source_bytes) {
    fail("regex of {} bytes exceeds max_source_bytes ({})", regex.size(), limits.max_source_bytes);
  }
  return Parser(decode_utf8(regex, "regex"), limits, deadline).parse();
}

}  // namespace tokenmill::grammar
