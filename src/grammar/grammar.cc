#include "grammar/grammar.h"

#include <algorithm>

namespace tokenmill::grammar {

bool CharClass::contains(uint32_t cp) const {
  // Ranges are sorted and disjoint: the first range ending at or after cp
  // is the only one that can hold it.
  auto it = std::lower_bound(ranges.begin(), ranges.end(), cp,
                             [](const CharRange& r, uint32_t c) { return r.hi < c; });
  const bool in = it != ranges.end() && it->lo <= cp;
  return in != negated;
}

}  // namespace tokenmill::grammar
