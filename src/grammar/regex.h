// Regular expression (the common ECMAScript / PCRE subset) -> GBNF rules
// matching exactly the strings the expression matches in full (anchored at
// both ends: a constraint describes the whole output or the whole string).
//
// Supported: literals and escapes (\n \t \r \f \v \0 \xHH \uHHHH \\ \. ...),
// character classes [..] with ranges and negation, \d \w \s \D \W \S, the
// dot (any character but a newline), groups (...) and (?:...), alternation,
// the quantifiers * + ? {m} {m,} {m,n} (lazy variants match the same
// language), and ^ / $ at the very ends. Anything else (backreferences,
// lookaround, named groups, \b, Unicode properties, flags) throws
// tokenmill::Error naming the construct and its offset.
// Thread-safety: pure functions.
#pragma once
#include <string>
#include <string_view>

#include "grammar/grammar_limits.h"

namespace tokenmill::grammar {

// Rules defining `root_name` (helpers named `root_name-...`).
std::string regex_rules(std::string_view regex, std::string_view root_name, const GrammarLimits& limits,
                        const Deadline& deadline);

// A complete grammar whose start rule `root` matches the expression.
std::string regex_to_gbnf(std::string_view regex, const GrammarLimits& limits, const Deadline& deadline);

}  // namespace tokenmill::grammar
