// Regular expression text -> a small syntax tree over code point sets, for
// regex.cc. The accepted dialect is the intersection of Python's `re` and
// ECMAScript (see regex.h); where the two differ in meaning (\d, \w, \s and
// their negations outside ASCII, `.` and line terminators) a construct is
// read as the set of characters BOTH engines would match, so a grammar built
// from the tree never accepts text either engine would reject.
// Thread-safety: values and pure functions.
#pragma once
#include <cstdint>
#include <string_view>
#include <vector>

#include "grammar/grammar_limits.h"
#include "grammar/regex.h"
#include "grammar/regex_charset.h"
#include "grammar/regex_rule_sink.h"

namespace tokenmill::grammar {

enum class RegexKind : uint8_t { kEmpty, kSet, kSeq, kAlt, kRepeat };

inline constexpr int kUnbounded = -1;

struct RegexNode {
  RegexKind kind = RegexKind::kEmpty;
  CharSet set;                  // kSet: never empty
  std::vector<uint32_t> items;  // kSeq, kAlt: children; kRepeat: the one repeated node
  int min = 0;                  // kRepeat
  int max = 0;                  // kRepeat: kUnbounded for no upper bound
};

// One top-level alternative with its anchors (^ and $ are accepted only at
// the ends of top-level alternatives).
struct RegexBranch {
  uint32_t node = 0;
  bool anchored_start = false;
  bool anchored_end = false;
};

// Nodes live in one arena and refer to each other by index; rewrites add
// nodes and share subtrees.
struct RegexTree {
  std::vector<RegexNode> nodes;
  std::vector<RegexBranch> branches;
  uint32_t add(RegexNode node);
};

// Throws tokenmill::Error naming the unsupported construct or syntax error
// and its offset (in code points), or the limit exceeded (max_repetition,
// max_symbols for the node count, the deadline).
RegexTree parse_regex(std::string_view regex, const GrammarLimits& limits, const Deadline& deadline);

// Parses `regex` and adds to `sink` a rule for its language under
// `options`; returns the rule's name. For converters that embed a regex in
// a larger grammar (JSON Schema `pattern`).
std::string add_regex_rule(std::string_view regex, RuleSink& sink, std::string_view hint, const GrammarLimits& limits,
                           const Deadline& deadline, const RegexOptions& options);

}  // namespace tokenmill::grammar
