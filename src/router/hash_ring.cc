#include "router/hash_ring.h"

#include <algorithm>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "util/check.h"

namespace tokenmill::router {

uint64_t hash_bytes(std::string_view bytes) { return XXH3_64bits(bytes.data(), bytes.size()); }

HashRing::HashRing(const std::vector<std::string>& names, int vnodes) : num_members_(static_cast<int>(names.size())) {
  TM_CHECK(vnodes >= 1);
  points_.reserve(names.size() * static_cast<size_t>(vnodes));
  for (size_t m = 0; m < names.size(); ++m) {
    for (int v = 0; v < vnodes; ++v) {
      const std::string label = names[m] + "#" + std::to_string(v);
      points_.push_back({hash_bytes(label), static_cast<int>(m)});
    }
  }
  // Ties (two points at one hash) are broken by member index so the order,
  // and with it every assignment, does not depend on the sort's stability.
  std::sort(points_.begin(), points_.end(),
            [](const Point& a, const Point& b) { return a.hash != b.hash ? a.hash < b.hash : a.member < b.member; });
}

std::vector<int> HashRing::walk(uint64_t key) const {
  std::vector<int> order;
  if (points_.empty()) return order;
  order.reserve(static_cast<size_t>(num_members_));
  std::vector<char> seen(static_cast<size_t>(num_members_), 0);
  const auto start =
      std::lower_bound(points_.begin(), points_.end(), key, [](const Point& p, uint64_t k) { return p.hash < k; });
  size_t i = static_cast<size_t>(start - points_.begin());
  for (size_t step = 0; step < points_.size() && order.size() < seen.size(); ++step, ++i) {
    const int m = points_[i % points_.size()].member;
    if (!seen[static_cast<size_t>(m)]) {
      seen[static_cast<size_t>(m)] = 1;
      order.push_back(m);
    }
  }
  return order;
}

}  // namespace tokenmill::router
