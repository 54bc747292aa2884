// Whole-text matching of a Grammar, code point by code point: the reference
// the token-level matcher is tested against, and what schema and regex
// converter tests use to check the language they produce.
#pragma once
#include <string_view>

#include "grammar/grammar.h"

namespace tokenmill::grammar {

// True when the grammar derives exactly `text` (UTF-8; invalid UTF-8 never
// matches). Cost: O(|text| x live parse stacks).
bool grammar_accepts(const Grammar& grammar, std::string_view text);

}  // namespace tokenmill::grammar
