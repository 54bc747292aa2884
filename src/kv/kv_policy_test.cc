// The streaming policy's arithmetic: which blocks go before a step, and the
// most a sequence holds; names and validation.
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
  EXPECT_THROW(make_kv_policy("h2o", 4, 1024, "preserve"), Error);
  EXPECT_THROW(make_kv_policy("streaming", 4, 0, "preserve"), Error);
  EXPECT_THROW(make_kv_policy("streaming", -1, 8, "preserve"), Error);
  EXPECT_THROW(make_kv_policy("streaming", 4, 8, "absolute"), Error);
  EXPECT_NO_THROW(make_kv_policy("full", 0, 0, "preserve"));  // full ignores the streaming fields
}

}  // namespace
}  // namespace tokenmill::kv
