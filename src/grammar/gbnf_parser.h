// GBNF text -> Grammar. The dialect is llama.cpp's GBNF, which vLLM and
// llama.cpp users already write:
//   rule-name ::= alternative | alternative ...      (names [A-Za-z][A-Za-z0-9_-]*)
//   items: "literal" (escapes \\ \" \n \r \t \xHH \uHHHH \UHHHHHHHH), [class]
//   with ranges and ^ negation, . (any code point), rule-name, ( group ),
//   each optionally followed by * + ? {m} {m,} {m,n}; # comments to the end
//   of the line; an empty alternative matches the empty string.
// The start rule is `root`.
//
// Repetition becomes plain rules (x{2,4} -> x x x? x? as nested optionals,
// x* -> a right-recursive helper), so the Grammar holds no repetition.
// Refused with tokenmill::Error naming the rule and line: syntax errors,
// undefined or duplicate rules, a missing `root`, left recursion (direct,
// indirect or through rules that can match empty; the matcher expands
// leftmost symbols eagerly and would loop), repetition of something that can
// match empty with an unbounded count, and any GrammarLimits bound.
#pragma once
#include <string_view>

#include "grammar/grammar.h"
#include "grammar/grammar_limits.h"

namespace tokenmill::grammar {

Grammar parse_gbnf(std::string_view text, const GrammarLimits& limits, const Deadline& deadline);

}  // namespace tokenmill::grammar
