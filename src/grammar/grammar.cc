#include "grammar/grammar.h"

#include <algorithm>

namespace tokenmill::grammar {

bool CharClass::contains(uint32_t cp) const {
  // Ranges are sorted and disjoint: the first range ending at or after cp
  // is the only one that can hold it.
  auto it = std::lower_bound(ranges.begin(), ranges.end(), cp, [](const CharRange& r, uint32_t c) { return r.hi < c; });
  const bool in = it != ranges.end() && it->lo <= cp;
  return in != negated;
}

bool CharClass::intersects(uint32_t lo, uint32_t hi) const {
  auto it = std::lower_bound(ranges.begin(), ranges.end(), lo, [](const CharRange& r, uint32_t c) { return r.hi < c; });
  if (!negated) return it != ranges.end() && it->lo <= hi;
  // Negated: some point of [lo, hi] must be outside every range. Walk the
  // ranges that overlap [lo, hi] and look for a gap.
  uint32_t next = lo;  // first point not yet shown covered
  for (; it != ranges.end() && it->lo <= next; ++it) {
    if (it->hi >= hi) return false;
    next = it->hi + 1;
  }
  return next <= hi;
}

}  // namespace tokenmill::grammar
