#include "grammar/grammar_analysis.h"

#include <string>

#include "util/error.h"

namespace tokenmill::grammar {

std::vector<bool> nullable_rules(const Grammar& g) {
  std::vector<bool> nullable(g.num_rules(), false);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < g.num_rules(); ++r) {
      if (nullable[r]) continue;
      for (uint32_t start : g.rule_alts[r]) {
        bool all = true;
        for (uint32_t p = start; g.symbols[p].kind != SymbolKind::kEnd && all; ++p) {
          all = g.symbols[p].kind == SymbolKind::kRule && nullable[g.symbols[p].index];
        }
        if (all) {
          nullable[r] = true;
          changed = true;
          break;
        }
      }
    }
  }
  return nullable;
}

namespace {

// The rules a rule can start with: those at the front of an alternative, or
// after a run of nullable rules.
std::vector<std::vector<uint32_t>> left_corners(const Grammar& g, const std::vector<bool>& nullable) {
  std::vector<std::vector<uint32_t>> edges(g.num_rules());
  for (size_t r = 0; r < g.num_rules(); ++r) {
    for (uint32_t start : g.rule_alts[r]) {
      for (uint32_t p = start; g.symbols[p].kind == SymbolKind::kRule; ++p) {
        edges[r].push_back(g.symbols[p].index);
        if (!nullable[g.symbols[p].index]) break;
      }
    }
  }
  return edges;
}

}  // namespace

void check_no_left_recursion(const Grammar& g, const std::vector<bool>& nullable) {
  const std::vector<std::vector<uint32_t>> edges = left_corners(g, nullable);
  enum Color : uint8_t { kWhite, kGrey, kBlack };
  std::vector<Color> color(g.num_rules(), kWhite);
  // Iterative DFS (grammars from schemas can be deep); path holds the grey rules.
  std::vector<std::pair<uint32_t, size_t>> path;
  for (uint32_t s = 0; s < g.num_rules(); ++s) {
    if (color[s] != kWhite) continue;
    path.push_back({s, 0});
    color[s] = kGrey;
    while (!path.empty()) {
      auto& [r, next] = path.back();
      if (next == edges[r].size()) {
        color[r] = kBlack;
        path.pop_back();
        continue;
      }
      const uint32_t t = edges[r][next++];
      if (color[t] == kGrey) {
        std::string cycle;
        bool on = false;
        for (const auto& [q, unused] : path) {
          on = on || q == t;
          if (on) cycle += g.rule_names[q] + " -> ";
        }
        fail("grammar error: left recursion ({}{}) is not supported; rewrite it with repetition", cycle,
             g.rule_names[t]);
      }
      if (color[t] == kWhite) {
        color[t] = kGrey;
        path.push_back({t, 0});
      }
    }
  }
}

}  // namespace tokenmill::grammar
