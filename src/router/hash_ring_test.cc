#include "router/hash_ring.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "router/load.h"

namespace tokenmill::router {
namespace {

std::vector<std::string> names(int n) {
  std::vector<std::string> out;
  for (int i = 0; i < n; ++i) out.push_back("http://127.0.0.1:" + std::to_string(8081 + i));
  return out;
}

uint64_t key(int i) { return hash_bytes("key-" + std::to_string(i)); }

TEST(HashRing, WalkVisitsEveryMemberOnce) {
  const HashRing ring(names(5), 16);
  for (int k = 0; k < 100; ++k) {
    std::vector<int> w = ring.walk(key(k));
    ASSERT_EQ(w.size(), 5u);
    std::sort(w.begin(), w.end());
    EXPECT_EQ(w, (std::vector<int>{0, 1, 2, 3, 4}));
  }
}

TEST(HashRing, AssignmentIsStable) {
  // Built twice (and from the same names in another order) the ring
  // assigns every key to the same member name.
  const std::vector<std::string> a = names(4);
  const std::vector<std::string> b = {a[2], a[0], a[3], a[1]};
  const HashRing ra(a, 64), ra2(a, 64), rb(b, 64);
  for (int k = 0; k < 2000; ++k) {
    EXPECT_EQ(ra.walk(key(k)), ra2.walk(key(k)));
    EXPECT_EQ(a[ra.walk(key(k))[0]], b[rb.walk(key(k))[0]]);
  }
}

TEST(HashRing, SharesAreBalanced) {
  const HashRing ring(names(4), 160);
  std::map<int, int> owned;
  const int num_keys = 20000;
  for (int k = 0; k < num_keys; ++k) ++owned[ring.walk(key(k))[0]];
  for (const auto& [member, count] : owned) {
    EXPECT_GT(count, num_keys / 4 * 0.8) << "member " << member;
    EXPECT_LT(count, num_keys / 4 * 1.2) << "member " << member;
  }
}

TEST(HashRing, RemovingAMemberMovesOnlyItsKeys) {
  const std::vector<std::string> all = names(4);
  std::vector<std::string> without = all;
  without.erase(without.begin() + 2);  // member 2 leaves
  const HashRing before(all, 160), after(without, 160);
  int moved = 0;
  const int num_keys = 5000;
  for (int k = 0; k < num_keys; ++k) {
    const std::string& owner_before = all[before.walk(key(k))[0]];
    const std::string& owner_after = without[after.walk(key(k))[0]];
    if (owner_before == all[2]) {
      ++moved;
      // Its keys go to the member that came next on the ring.
      EXPECT_EQ(owner_after, all[before.walk(key(k))[1]]);
    } else {
      EXPECT_EQ(owner_before, owner_after) << "key " << k << " moved though its owner stayed";
    }
  }
  EXPECT_GT(moved, num_keys / 4 * 0.8);
  EXPECT_LT(moved, num_keys / 4 * 1.2);
}

TEST(HashRing, SkippingADownMemberEqualsRemovingIt) {
  // The router keeps one ring and skips replicas that are down: the same
  // assignment as a ring rebuilt without them.
  const std::vector<std::string> all = names(3);
  const HashRing ring(all, 160), without1({all[0], all[2]}, 160);
  const std::vector<double> loads = {0, 0, 0};
  const std::vector<char> usable = {1, 0, 1};
  for (int k = 0; k < 2000; ++k) {
    const Pick p = pick_affinity(ring, key(k), loads, usable, 0.25);
    const std::vector<std::string> survivors = {all[0], all[2]};
    EXPECT_EQ(all[static_cast<size_t>(p.replica)], survivors[static_cast<size_t>(without1.walk(key(k))[0])]);
    EXPECT_TRUE(p.preferred);
  }
}

TEST(HashRing, EmptyRingWalksNothing) {
  const HashRing ring({}, 8);
  EXPECT_TRUE(ring.walk(42).empty());
}

}  // namespace
}  // namespace tokenmill::router
