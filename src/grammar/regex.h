// Regular expression (the common ECMAScript / PCRE subset) -> GBNF rules
// matching exactly the strings the expression matches in full (anchored at
// both ends: a constraint describes the whole output or the whole string).
//
// Supported: literals and escapes (\n \t \r \f \v \0 \xHH \uHHHH \\ \. ...),
// character classes [..] with ranges and negation, \d \w \s \D \W \S, the
// dot, groups (...) and (?:...), alternation,
// the quantifiers * + ? {m} {m,} {m,n} (lazy variants match the same
// language), and ^ / $ at the ends of the expression or of a top-level
// alternative. Anything else (backreferences,
// lookaround, named groups, \b, Unicode properties, flags) throws
// tokenmill::Error naming the construct and its offset.
//
// Where Python's re and ECMAScript disagree, a construct means only what
// both accept: \d \w \s are their ASCII sets, \D \W and negated classes
// holding \d or \w match ASCII only, \S and negated classes holding \s
// exclude every Unicode space, and the dot excludes \n \r U+2028 U+2029.
// Constructs they read differently ([]...], {,n}, a '{' that is not a
// quantifier, octal escapes) are refused.
// Thread-safety: pure functions.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

#include "grammar/grammar_limits.h"

namespace tokenmill::grammar {

struct RegexOptions {
  // Match the text of a JSON string's contents instead of raw text: each
  // character the expression allows appears as JSON spells it inside a
  // string literal (unescaped where JSON allows, else as \" \\ \n ... or
  // \u00XX), so the rules never produce invalid JSON. Lengths and the
  // expression's meaning refer to the decoded characters.
  bool json_string = false;
  // Search semantics (Python's re.search, as JSON Schema `pattern` uses):
  // a top-level alternative without ^ may be preceded, one without $
  // followed, by any characters. Otherwise the match is anchored at both
  // ends and ^ / $ at the ends change nothing.
  bool search = false;
};

// Rules defining `root_name` (helpers named `root_name-...`).
std::string regex_rules(std::string_view regex, std::string_view root_name, const GrammarLimits& limits,
                        const Deadline& deadline);
std::string regex_rules(std::string_view regex, std::string_view root_name, const GrammarLimits& limits,
                        const Deadline& deadline, const RegexOptions& options);

// The fewest and most characters (code points, decoded) a matching string
// can have under `options`; max is -1 when unbounded.
struct RegexLengthRange {
  int64_t min = 0;
  int64_t max = -1;
};
RegexLengthRange regex_length_range(std::string_view regex, const GrammarLimits& limits, const Deadline& deadline,
                                    const RegexOptions& options);

// A complete grammar whose start rule `root` matches the expression.
std::string regex_to_gbnf(std::string_view regex, const GrammarLimits& limits, const Deadline& deadline);

}  // namespace tokenmill::grammar
