// The streaming and heavy-hitter policies' arithmetic: which blocks go
// before a step, and the most a sequence holds; names and validation.
#include "kv/kv_policy.h"

#include <gtest/gtest.h>

#include "util/error.h"

namespace tokenmill::kv {
namespace {

KvPolicy streaming(int64_t sinks, int64_t window) { return make_kv_policy("streaming", sinks, window, "preserve"); }

TEST(KvPolicy, FullEvictsNothing) {
  EXPECT_FALSE(KvPolicy{}.evicts());
  EXPECT_EQ(blocks_to_evict(KvPolicy{}, 100000, 16), 0);
  EXPECT_EQ(KvPolicy{}.describe(), "full");
}

// Sinks 4 keep block 0 (16 positions); a window of 32: the query at cache
// index c attends c - 31.. so block 1 ([16, 32)) goes once c - 31 >= 32.
TEST(KvPolicy, BlocksLeaveWhenTheyAreWhollyBeforeTheWindow) {
  const KvPolicy p = streaming(4, 32);
  EXPECT_EQ(p.sink_blocks(16), 1);
  EXPECT_EQ(blocks_to_evict(p, 62, 16), 0);
  EXPECT_EQ(blocks_to_evict(p, 63, 16), 1);
  EXPECT_EQ(blocks_to_evict(p, 78, 16), 1);  // after one eviction the query is at 62
  EXPECT_EQ(blocks_to_evict(p, 79, 16), 2);
  EXPECT_EQ(blocks_to_evict(p, 1000, 16), (1000 - 63) / 16 + 1);
  // After evicting, the cache holds the sinks and at most the window plus a block.
  for (int64_t c = 0; c < 400; ++c) {
    const int64_t left = c - 16 * blocks_to_evict(p, c, 16);
    EXPECT_LE(left, 16 + 32 + 15) << c;
    EXPECT_EQ(blocks_to_evict(p, left, 16), 0) << c;  // nothing more to go
  }
  EXPECT_EQ(blocks_to_evict(streaming(0, 1), 16, 16), 1);  // no sinks, a window of one
  EXPECT_EQ(p.max_blocks(16, 1), 1 + 3 + 1);
  EXPECT_EQ(p.max_blocks(16, 40), 1 + 3 + 3);
}

TEST(KvPolicy, NamesAndErrors) {
  EXPECT_EQ(make_kv_policy("streaming", 4, 1024, "rerotate").describe(),
            "streaming(sinks=4,window=1024,positions=rerotate)");
  EXPECT_EQ(make_kv_policy("h2o", 4, 256, "preserve", 1024).describe(),
            "h2o(sinks=4,window=256,budget=1024,positions=preserve)");
  EXPECT_THROW(make_kv_policy("h2o", 4, 1024, "preserve", 1000), Error);  // budget below sinks + window
  EXPECT_THROW(make_kv_policy("lru", 4, 1024, "preserve"), Error);
  EXPECT_THROW(make_kv_policy("streaming", 4, 0, "preserve"), Error);
  EXPECT_THROW(make_kv_policy("streaming", -1, 8, "preserve"), Error);
  EXPECT_THROW(make_kv_policy("streaming", 4, 8, "absolute"), Error);
  EXPECT_NO_THROW(make_kv_policy("full", 0, 0, "preserve"));  // full ignores the streaming fields
}

// Sinks 4 (block 0), window 20, budget 64, block size 16: candidates are
// the blocks after block 0 that end before the window; the least mass goes.
TEST(KvPolicy, HeavyHitterEvictsTheLeastAttendedCandidatesDownToTheBudget) {
  const KvPolicy p = heavy_hitter_policy(4, 20, 64);
  EXPECT_TRUE(p.evicts());
  EXPECT_TRUE(p.needs_attention_mass());
  EXPECT_FALSE(streaming(4, 20).needs_attention_mass());
  std::vector<float> mass(100, 1.0f);
  EXPECT_TRUE(blocks_to_evict_now(p, 64, 16, mass).empty());  // within the budget
  // 100 positions: 36 over the budget -> 3 blocks; candidates end at or
  // before index 81, so blocks 1..4 ([16, 80)).
  for (int i = 32; i < 48; ++i) mass[i] = 5.0f;  // block 2 is a heavy hitter
  EXPECT_EQ(blocks_to_evict_now(p, 100, 16, mass), (std::vector<int64_t>{1, 3, 4}));
  mass[70] = 100.0f;  // block 4 now outweighs block 2, which goes instead
  EXPECT_EQ(blocks_to_evict_now(p, 100, 16, mass), (std::vector<int64_t>{1, 2, 3}));
  // Ties go to the older block; missing mass counts as 0 (the newer blocks).
  // Blocks 1 and 2 hold 16 each, block 3 two, block 4 none: 4, 3, then the older of 1 and 2.
  EXPECT_EQ(blocks_to_evict_now(p, 100, 16, std::vector<float>(50, 1.0f)), (std::vector<int64_t>{1, 3, 4}));
  EXPECT_EQ(blocks_to_evict_now(p, 100, 16, {}), (std::vector<int64_t>{1, 2, 3}));
  // Whatever the mass, the cache ends within max_blocks and nothing more goes.
  for (int64_t c = 0; c < 400; ++c) {
    const std::vector<float> m(static_cast<size_t>(c), 0.5f);
    const std::vector<int64_t> ev = blocks_to_evict_now(p, c, 16, m);
    const int64_t left = c - 16 * std::ssize(ev);
    EXPECT_LE((left + 15) / 16 + 1, p.max_blocks(16, 1)) << c;
    EXPECT_LE(left, std::max<int64_t>(64, 2 * 16 + 20 - 2)) << c;
    EXPECT_TRUE(blocks_to_evict_now(p, left, 16, std::vector<float>(static_cast<size_t>(left), 0.5f)).empty()) << c;
    for (int64_t b : ev) {
      EXPECT_GE(b, 1) << c;                      // never a sink block
      EXPECT_LE((b + 1) * 16, c - 20 + 1) << c;  // never the window
    }
  }
}

TEST(KvPolicy, StreamingListsItsBlocksAndEvictedPositionsAreErased) {
  const KvPolicy p = streaming(4, 32);
  EXPECT_EQ(blocks_to_evict_now(p, 79, 16), (std::vector<int64_t>{1, 2}));
  EXPECT_TRUE(blocks_to_evict_now(KvPolicy{}, 1000, 16).empty());
  const std::vector<int64_t> evicted{1, 3};
  EXPECT_EQ(evicted_before(evicted, 0), 0);
  EXPECT_EQ(evicted_before(evicted, 2), 1);
  EXPECT_EQ(evicted_before(evicted, 4), 2);
  std::vector<float> per(70);
  for (size_t i = 0; i < per.size(); ++i) per[i] = static_cast<float>(i);
  erase_evicted_positions(per, evicted, 16);
  ASSERT_EQ(per.size(), 38u);
  EXPECT_EQ(per[15], 15.0f);
  EXPECT_EQ(per[16], 32.0f);  // block 2 moved down to block 1
  EXPECT_EQ(per[32], 64.0f);  // block 4 (partial) to block 2
}

}  // namespace
}  // namespace tokenmill::kv
