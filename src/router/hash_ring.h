// A consistent-hash ring with virtual nodes. Each member (a replica, by its
// URL) owns `vnodes` points at xxh3(name + "#" + i); a key belongs to the
// first point at or after it, wrapping round. Removing a member moves only
// the keys it owned (to the next points along), and many points per member
// keep each one's share of the key space close to 1/N.
//
// The ring is immutable once built and safe to read from any thread. The
// router builds it once with every replica and treats a replica that is
// down as absent by skipping its points in walk(): the same keys move as if
// the ring had been rebuilt without it, with no lock and no rebuild.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tokenmill::router {

class HashRing {
 public:
  // Precondition: vnodes >= 1; names are distinct (members are their indices).
  HashRing(const std::vector<std::string>& names, int vnodes);

  // Every member, each once, in the order a walk clockwise from `key` meets
  // them: [0] owns the key; [1] owns it if [0] is removed, and so on.
  // Cost: O(log P) to find the start plus the points walked until every
  // member was seen (P = members x vnodes).
  std::vector<int> walk(uint64_t key) const;

  int num_members() const { return num_members_; }

 private:
  struct Point {
    uint64_t hash;
    int member;
  };
  std::vector<Point> points_;  // sorted by hash
  int num_members_ = 0;
};

// The 64-bit hash the router uses for ring points and request keys.
uint64_t hash_bytes(std::string_view bytes);

}  // namespace tokenmill::router
