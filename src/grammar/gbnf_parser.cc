#include "grammar/gbnf_parser.h"

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "grammar/grammar_analysis.h"
#include "grammar/utf8.h"
#include "util/error.h"

namespace tokenmill::grammar {
namespace {

using Alt = std::vector<Symbol>;

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

// Recursive descent over the text, building rules with alternatives as
// vectors; flatten() lays them out as a Grammar at the end.
class GbnfParser {
 public:
  GbnfParser(std::string_view text, const GrammarLimits& limits, const Deadline& deadline)
      : s_(text), limits_(limits), deadline_(deadline) {}

  Grammar run();

 private:
  [[noreturn]] void error(const std::string& what) const { fail("grammar error at line {}: {}", line_, what); }
  bool at_end() const { return i_ >= s_.size(); }
  char peek() const { return at_end() ? '\0' : s_[i_]; }
  void skip_space();
  bool at_definition();  // at "name ::=" (after skip_space)
  std::string parse_name();
  uint32_t rule_id(const std::string& name);
  uint32_t new_rule(const std::string& base);
  void parse_definition();
  std::vector<Alt> parse_alternatives(const std::string& owner, bool nested);
  Alt parse_sequence(const std::string& owner, bool nested);
  Alt parse_atom(const std::string& owner);
  Alt parse_literal();
  Symbol parse_class();
  uint32_t parse_escape(bool in_class);
  uint32_t parse_char(bool in_class);
  int parse_count();
  Alt repeat(const Alt& item, const std::string& owner, int min, std::optional<int> max);
  uint32_t wrap(const Alt& item, const std::string& owner);
  uint32_t class_id(CharClass cls);
  void count_symbols(size_t n);

  std::string_view s_;
  size_t i_ = 0;
  int line_ = 1;
  const GrammarLimits& limits_;
  const Deadline& deadline_;
  std::vector<std::string> names_;
  std::vector<std::vector<Alt>> rules_;
  std::vector<bool> defined_;
  std::vector<int> first_line_;
  std::unordered_map<std::string, uint32_t> ids_;
  std::vector<CharClass> classes_;
  std::map<std::pair<std::vector<std::pair<uint32_t, uint32_t>>, bool>, uint32_t> class_ids_;
  std::map<std::pair<uint32_t, int>, uint32_t> optional_chains_;  // (wrapped item rule, k) -> rule
  std::map<uint32_t, uint32_t> class_wrappers_;                   // class -> rule holding just it
  std::map<uint32_t, uint32_t> stars_;                            // wrapped item rule -> star rule
  std::vector<uint32_t> starred_items_;                           // must not be nullable
  size_t num_symbols_ = 0;
  int synthetic_ = 0;
};

void GbnfParser::skip_space() {
  while (!at_end()) {
    const char c = s_[i_];
    if (c == '\n') {
      ++line_;
      ++i_;
    } else if (c == ' ' || c == '\t' || c == '\r') {
      ++i_;
    } else if (c == '#') {
      while (!at_end() && s_[i_] != '\n') ++i_;
    } else {
      break;
    }
  }
}

bool GbnfParser::at_definition() {
  size_t j = i_;
  while (j < s_.size() && is_name_char(s_[j])) ++j;
  if (j == i_) return false;
  while (j < s_.size() && (s_[j] == ' ' || s_[j] == '\t')) ++j;
  return s_.substr(j, 3) == "::=";
}

std::string GbnfParser::parse_name() {
  const size_t start = i_;
  while (!at_end() && is_name_char(s_[i_])) ++i_;
  if (start == i_) error(fmt::format("expected a rule name, found '{}'", peek()));
  std::string name(s_.substr(start, i_ - start));
  if (!((name[0] >= 'a' && name[0] <= 'z') || (name[0] >= 'A' && name[0] <= 'Z'))) {
    error(fmt::format("rule name '{}' must start with a letter", name));
  }
  return name;
}

uint32_t GbnfParser::rule_id(const std::string& name) {
  auto [it, inserted] = ids_.emplace(name, static_cast<uint32_t>(names_.size()));
  if (inserted) {
    if (names_.size() >= limits_.max_rules) error(fmt::format("more than {} rules", limits_.max_rules));
    names_.push_back(name);
    rules_.emplace_back();
    defined_.push_back(false);
    first_line_.push_back(line_);
  }
  return it->second;
}

uint32_t GbnfParser::new_rule(const std::string& base) {
  // '#' cannot appear in a GBNF name, so a rule defined later in the text
  // can never clash with a helper rule (the name shows only in messages).
  const std::string name = fmt::format("{}#{}", base, ++synthetic_);
  const uint32_t id = rule_id(name);
  defined_[id] = true;
  return id;
}

void GbnfParser::count_symbols(size_t n) {
  num_symbols_ += n;
  if (num_symbols_ > limits_.max_symbols) error(fmt::format("more than {} grammar symbols", limits_.max_symbols));
}

void GbnfParser::parse_definition() {
  const std::string name = parse_name();
  skip_space();
  if (s_.substr(i_, 3) != "::=") error(fmt::format("expected '::=' after rule name '{}'", name));
  i_ += 3;
  const uint32_t id = rule_id(name);
  if (defined_[id]) error(fmt::format("rule '{}' is defined twice", name));
  defined_[id] = true;
  std::vector<Alt> alts = parse_alternatives(name, false);
  rules_[id] = std::move(alts);
  deadline_.check("parsing the grammar");
}

std::vector<Alt> GbnfParser::parse_alternatives(const std::string& owner, bool nested) {
  std::vector<Alt> alts;
  alts.push_back(parse_sequence(owner, nested));
  while (peek() == '|') {
    ++i_;
    alts.push_back(parse_sequence(owner, nested));
  }
  return alts;
}

Alt GbnfParser::parse_sequence(const std::string& owner, bool nested) {
  Alt seq;
  for (;;) {
    skip_space();
    if (at_end() || peek() == '|' || peek() == ')') break;
    if (!nested && at_definition()) break;
    Alt item = parse_atom(owner);
    const char c = peek();
    if (c == '*' || c == '+' || c == '?') {
      ++i_;
      item = repeat(item, owner, c == '+' ? 1 : 0, c == '?' ? std::optional<int>(1) : std::nullopt);
    } else if (c == '{') {
      ++i_;
      const int min = parse_count();
      int max = min;  // -1: unbounded
      if (peek() == ',') {
        ++i_;
        max = peek() == '}' ? -1 : parse_count();
      }
      if (peek() != '}') error("expected '}' to close a repetition count");
      ++i_;
      if (max >= 0 && max < min) error(fmt::format("repetition {{{},{}}}: the maximum is below the minimum", min, max));
      item = repeat(item, owner, min, max < 0 ? std::nullopt : std::optional<int>(max));
    }
    seq.insert(seq.end(), item.begin(), item.end());
  }
  count_symbols(seq.size() + 1);
  return seq;
}

Alt GbnfParser::parse_atom(const std::string& owner) {
  const char c = peek();
  if (c == '"') return parse_literal();
  if (c == '[') return {parse_class()};
  if (c == '.') {
    ++i_;
    return {Symbol{SymbolKind::kClass, class_id(CharClass{{}, true})}};
  }
  if (c == '(') {
    ++i_;
    std::vector<Alt> alts = parse_alternatives(owner, true);
    skip_space();
    if (peek() != ')') error("expected ')' to close a group");
    ++i_;
    const uint32_t id = new_rule(owner);
    rules_[id] = std::move(alts);
    return {Symbol{SymbolKind::kRule, id}};
  }
  if (is_name_char(c)) return {Symbol{SymbolKind::kRule, rule_id(parse_name())}};
  error(fmt::format("unexpected character '{}'", c));
}

Alt GbnfParser::parse_literal() {
  ++i_;  // the opening quote
  Alt seq;
  while (peek() != '"') {
    if (at_end() || peek() == '\n') error("unterminated string literal");
    const uint32_t cp = parse_char(false);
    seq.push_back(Symbol{SymbolKind::kClass, class_id(CharClass{{{cp, cp}}, false})});
  }
  ++i_;
  return seq;
}

Symbol GbnfParser::parse_class() {
  ++i_;  // '['
  CharClass cls;
  if (peek() == '^') {
    cls.negated = true;
    ++i_;
  }
  while (peek() != ']') {
    if (at_end() || peek() == '\n') error("unterminated character class");
    const uint32_t lo = parse_char(true);
    uint32_t hi = lo;
    if (peek() == '-' && i_ + 1 < s_.size() && s_[i_ + 1] != ']') {
      ++i_;
      hi = parse_char(true);
      if (hi < lo) error(fmt::format("character range U+{:04X}-U+{:04X} is reversed", lo, hi));
    }
    cls.ranges.push_back({lo, hi});
  }
  ++i_;
  return Symbol{SymbolKind::kClass, class_id(std::move(cls))};
}

uint32_t GbnfParser::parse_char(bool in_class) {
  if (peek() == '\\') return parse_escape(in_class);
  const size_t before = i_;
  std::optional<uint32_t> cp = decode_utf8(s_, i_);
  if (!cp) error(fmt::format("invalid UTF-8 at byte {}", before));
  return *cp;
}

uint32_t GbnfParser::parse_escape(bool in_class) {
  ++i_;  // backslash
  const char c = peek();
  ++i_;
  switch (c) {
    case 'n': return '\n';
    case 'r': return '\r';
    case 't': return '\t';
    case '\\':
    case '"':
    case '/': return static_cast<uint8_t>(c);
    case '[':
    case ']':
    case '-':
    case '^':
      if (in_class) return static_cast<uint8_t>(c);
      break;
    case 'x':
    case 'u':
    case 'U': {
      const int digits = c == 'x' ? 2 : c == 'u' ? 4 : 8;
      uint32_t cp = 0;
      for (int k = 0; k < digits; ++k) {
        const char h = peek();
        const int v = h >= '0' && h <= '9'   ? h - '0'
                      : h >= 'a' && h <= 'f' ? h - 'a' + 10
                      : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                             : -1;
        if (v < 0) error(fmt::format("\\{} needs {} hex digits", c, digits));
        cp = cp * 16 + static_cast<uint32_t>(v);
        ++i_;
      }
      if (cp > 0x10FFFF) error(fmt::format("code point U+{:X} is past U+10FFFF", cp));
      return cp;
    }
    default: break;
  }
  error(fmt::format("unknown escape '\\{}'", c));
}

int GbnfParser::parse_count() {
  skip_space();
  const size_t start = i_;
  int64_t v = 0;
  while (peek() >= '0' && peek() <= '9') {
    v = v * 10 + (peek() - '0');
    if (v > limits_.max_repetition)
      error(fmt::format("repetition count above the limit of {}", limits_.max_repetition));
    ++i_;
  }
  if (start == i_) error("expected a number in a repetition count");
  skip_space();
  return static_cast<int>(v);
}

uint32_t GbnfParser::wrap(const Alt& item, const std::string& owner) {
  if (item.size() == 1 && item[0].kind == SymbolKind::kRule) return item[0].index;
  const bool one_class = item.size() == 1;  // [a-z]* repeated many times shares its rules
  if (one_class) {
    auto it = class_wrappers_.find(item[0].index);
    if (it != class_wrappers_.end()) return it->second;
  }
  const uint32_t id = new_rule(owner);
  if (one_class) class_wrappers_.emplace(item[0].index, id);
  rules_[id] = {item};
  count_symbols(item.size() + 1);
  return id;
}

// x{min,max}: min copies, then either a star rule (x S | empty) or a chain
// of nested optionals (x (x (x)?)?)?, which is unambiguous. Rules are
// shared between repetitions of the same item.
Alt GbnfParser::repeat(const Alt& item, const std::string& owner, int min, std::optional<int> max) {
  Alt out;
  if (item.empty()) return out;
  const uint32_t x = wrap(item, owner);
  const Symbol xs{SymbolKind::kRule, x};
  count_symbols(static_cast<size_t>(min));
  out.assign(static_cast<size_t>(min), xs);
  if (!max) {
    auto it = stars_.find(x);
    if (it == stars_.end()) {
      const uint32_t star = new_rule(owner);
      rules_[star] = {{xs, Symbol{SymbolKind::kRule, star}}, {}};
      count_symbols(4);
      starred_items_.push_back(x);
      it = stars_.emplace(x, star).first;
    }
    out.push_back(Symbol{SymbolKind::kRule, it->second});
    return out;
  }
  uint32_t prev = 0;
  for (int k = 1; k <= *max - min; ++k) {
    auto it = optional_chains_.find({x, k});
    if (it == optional_chains_.end()) {
      const uint32_t opt = new_rule(owner);
      Alt first = {xs};
      if (k > 1) first.push_back(Symbol{SymbolKind::kRule, prev});
      rules_[opt] = {first, {}};
      count_symbols(first.size() + 2);
      it = optional_chains_.emplace(std::make_pair(x, k), opt).first;
    }
    prev = it->second;
    if (k % 256 == 0) deadline_.check("expanding a repetition");
  }
  if (*max > min) out.push_back(Symbol{SymbolKind::kRule, prev});
  return out;
}

uint32_t GbnfParser::class_id(CharClass cls) {
  std::sort(cls.ranges.begin(), cls.ranges.end(), [](const CharRange& a, const CharRange& b) { return a.lo < b.lo; });
  std::vector<CharRange> merged;
  for (const CharRange& r : cls.ranges) {
    if (!merged.empty() && r.lo <= merged.back().hi + 1) {
      merged.back().hi = std::max(merged.back().hi, r.hi);
    } else {
      merged.push_back(r);
    }
  }
  cls.ranges = std::move(merged);
  std::vector<std::pair<uint32_t, uint32_t>> key;
  for (const CharRange& r : cls.ranges) key.emplace_back(r.lo, r.hi);
  auto [it, inserted] = class_ids_.emplace(std::make_pair(std::move(key), cls.negated), classes_.size());
  if (inserted) classes_.push_back(std::move(cls));
  return it->second;
}

Grammar GbnfParser::run() {
  if (s_.size() > limits_.max_gbnf_bytes)
    error(fmt::format("grammar text longer than {} bytes", limits_.max_gbnf_bytes));
  for (skip_space(); !at_end(); skip_space()) parse_definition();
  for (size_t r = 0; r < names_.size(); ++r) {
    if (!defined_[r]) fail("grammar error: rule '{}' (used at line {}) is not defined", names_[r], first_line_[r]);
  }
  auto root = ids_.find("root");
  if (root == ids_.end()) fail("grammar error: no 'root' rule (the start rule must be named root)");

  Grammar g;
  g.rule_names = std::move(names_);
  g.classes = std::move(classes_);
  g.root = root->second;
  g.rule_alts.resize(rules_.size());
  g.symbols.reserve(num_symbols_);
  for (size_t r = 0; r < rules_.size(); ++r) {
    for (const Alt& alt : rules_[r]) {
      g.rule_alts[r].push_back(static_cast<uint32_t>(g.symbols.size()));
      g.symbols.insert(g.symbols.end(), alt.begin(), alt.end());
      g.symbols.push_back(Symbol{SymbolKind::kEnd, 0});
    }
  }
  const std::vector<bool> nullable = nullable_rules(g);
  for (uint32_t x : starred_items_) {
    if (nullable[x]) {
      fail("grammar error: rule '{}' can match the empty string and is repeated without bound (* + {{m,}})",
           g.rule_names[x]);
    }
  }
  check_no_left_recursion(g, nullable);
  deadline_.check("checking the grammar");
  return g;
}

}  // namespace

Grammar parse_gbnf(std::string_view text, const GrammarLimits& limits, const Deadline& deadline) {
  return GbnfParser(text, limits, deadline).run();
}

}  // namespace tokenmill::grammar
