// Bounds on grammar compilation. Constraints come from clients, so every
// stage that can grow (schema expansion, repetition unrolling, the rule
// table, the compile clock) is capped, and exceeding a cap is a clear
// tokenmill::Error naming the limit, never a hung worker or a silently
// unconstrained request.
#pragma once
#include <chrono>
#include <cstddef>
#include <string>

#include "util/clock.h"

namespace tokenmill::grammar {

struct GrammarLimits {
  size_t max_source_bytes = 1 << 20;  // schema, regex or GBNF text as sent
  size_t max_gbnf_bytes = 4 << 20;    // GBNF text produced from a schema or regex
  size_t max_rules = 20000;           // rules after repetition rewriting
  size_t max_symbols = 400000;        // symbols in all alternatives together
  int max_schema_depth = 64;          // nesting of schema objects/arrays/$ref expansion
  int max_repetition = 10000;         // m and n of {m,n} (minItems, maxLength ...)
  std::chrono::milliseconds max_compile_time{2000};
};

// A compile clock: check() throws tokenmill::Error once the budget is spent.
// Cheap (one clock read); call it once per rule or schema node, not per byte.
class Deadline {
 public:
  explicit Deadline(std::chrono::milliseconds budget) : budget_(budget), end_(SteadyClock::now() + budget) {}
  // Throws "grammar compilation took longer than N ms (<stage>)".
  void check(const char* stage) const;

 private:
  std::chrono::milliseconds budget_;
  SteadyClock::time_point end_;
};

}  // namespace tokenmill::grammar
