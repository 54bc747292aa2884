// Static checks on a Grammar that make matching safe: which rules can match
// the empty string, and the refusal of left recursion (the matcher expands
// leftmost rule references eagerly and would never stop on one).
#pragma once
#include <vector>

#include "grammar/grammar.h"

namespace tokenmill::grammar {

// [num_rules] true when the rule derives the empty string. O(symbols x passes).
std::vector<bool> nullable_rules(const Grammar& grammar);

// Throws tokenmill::Error naming the cycle ("a -> b -> a") when a rule can
// reach itself without consuming a character.
void check_no_left_recursion(const Grammar& grammar, const std::vector<bool>& nullable);

}  // namespace tokenmill::grammar
