// A context-free grammar over Unicode code points, in the flat form the
// matcher walks: every alternative of every rule is a run of symbols in one
// array, ended by a kEnd symbol, so that a parse position is one uint32_t
// (an index into `symbols`). Terminals are character classes; a literal
// string is a run of one-character classes.
//
// Built by parse_gbnf (gbnf_parser.h), which also rewrites repetition into
// plain rules and refuses left recursion, so a Grammar that exists can be
// matched without looping.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace tokenmill::grammar {

struct CharRange {
  uint32_t lo;  // inclusive code points
  uint32_t hi;
};

struct CharClass {
  std::vector<CharRange> ranges;  // sorted, disjoint, merged
  bool negated = false;
  bool contains(uint32_t cp) const;
  bool intersects(uint32_t lo, uint32_t hi) const;  // holds some code point in [lo, hi]
  bool operator==(const CharClass&) const = default;
};

enum class SymbolKind : uint8_t {
  kEnd,    // end of an alternative
  kRule,   // index: a rule id
  kClass,  // index: a class id
};

struct Symbol {
  SymbolKind kind;
  uint32_t index;
};

struct Grammar {
  std::vector<std::string> rule_names;           // [num_rules]
  std::vector<std::vector<uint32_t>> rule_alts;  // [num_rules][num_alts] offsets into symbols
  std::vector<Symbol> symbols;                   // every alternative, each closed by kEnd
  std::vector<CharClass> classes;                // [num_classes]
  uint32_t root = 0;                             // the start rule ("root")

  size_t num_rules() const { return rule_alts.size(); }
};

}  // namespace tokenmill::grammar
