// BlockAllocator: allocation order, refcounts, free/evictable transitions,
// LRU reclaim order with the eviction callback, gauges, and aborts on misuse.
#include "kv/block_allocator.h"

#include <gtest/gtest.h>

#include <vector>

#include "util/error.h"

namespace tokenmill::kv {
namespace {

TEST(BlockAllocator, FreshPoolHandsOutAscendingIdsThenRunsDry) {
  BlockAllocator a(3);
  EXPECT_EQ(a.num_free(), 3);
  EXPECT_EQ(a.allocate(), 0);
  EXPECT_EQ(a.allocate(), 1);
  EXPECT_EQ(a.allocate(), 2);
  EXPECT_EQ(a.allocate(), std::nullopt);
  EXPECT_EQ(a.num_used(), 3);
  EXPECT_EQ(a.num_free(), 0);
  EXPECT_EQ(a.high_water(), 3);
}

TEST(BlockAllocator, RefCountsAndReuse) {
  BlockAllocator a(4);
  const BlockId b0 = *a.allocate();
  const BlockId b1 = *a.allocate();
  a.retain(b0);
  EXPECT_EQ(a.ref_count(b0), 2);
  a.release(b0);
  EXPECT_EQ(a.ref_count(b0), 1);
  EXPECT_EQ(a.num_used(), 2);
  a.release(b0);
  EXPECT_EQ(a.ref_count(b0), 0);
  EXPECT_EQ(a.num_used(), 1);
  EXPECT_EQ(a.num_free(), 3);
  EXPECT_EQ(a.allocate(), b0);  // most recently released is reused first
  a.release(b0);
  a.release(b1);
  EXPECT_EQ(a.num_free(), 4);
  EXPECT_EQ(a.high_water(), 2);
}

TEST(BlockAllocator, CachedBlocksBecomeEvictableAndAreReclaimedInLruOrder) {
  BlockAllocator a(3);
  std::vector<BlockId> evicted;
  a.set_evict_callback([&](BlockId id) { evicted.push_back(id); });
  const BlockId b0 = *a.allocate(), b1 = *a.allocate(), b2 = *a.allocate();
  for (BlockId b : {b0, b1, b2}) a.set_cached(b, true);
  // Release order 1, 0, 2: LRU order is the same.
  a.release(b1);
  a.release(b0);
  a.release(b2);
  EXPECT_EQ(a.num_free(), 0);
  EXPECT_EQ(a.num_evictable(), 3);
  EXPECT_EQ(a.num_available(), 3);
  EXPECT_EQ(a.num_used(), 0);
  EXPECT_TRUE(a.is_evictable(b0));
  // A hit on b1 revives it; it leaves the LRU list.
  a.retain(b1);
  EXPECT_EQ(a.num_evictable(), 2);
  EXPECT_EQ(a.allocate(), b0);
  EXPECT_EQ(a.allocate(), b2);
  EXPECT_EQ(a.allocate(), std::nullopt);
  EXPECT_EQ(evicted, (std::vector<BlockId>{b0, b2}));
  EXPECT_EQ(a.num_evictions(), 2);
  EXPECT_FALSE(a.is_cached(b0));
  // Released again, b1 is evictable; released reallocated blocks are free.
  a.release(b1);
  a.release(b0);
  EXPECT_EQ(a.num_evictable(), 1);
  EXPECT_EQ(a.num_free(), 1);
  // A free block is preferred over an evictable one.
  EXPECT_EQ(a.allocate(), b0);
  EXPECT_EQ(evicted.size(), 2u);
}

TEST(BlockAllocator, UncachingAnEvictableBlockFreesIt) {
  BlockAllocator a(2);
  const BlockId b = *a.allocate();
  a.set_cached(b, true);
  a.release(b);
  EXPECT_EQ(a.num_evictable(), 1);
  a.set_cached(b, false);
  EXPECT_EQ(a.num_evictable(), 0);
  EXPECT_EQ(a.num_free(), 2);
}

TEST(BlockAllocator, RejectsEmptyPool) { EXPECT_THROW(BlockAllocator(0), Error); }

TEST(BlockAllocatorDeathTest, DoubleFreeAborts) {
  BlockAllocator a(2);
  const BlockId b = *a.allocate();
  a.release(b);
  EXPECT_DEATH(a.release(b), "double free");
}

TEST(BlockAllocatorDeathTest, RetainOfFreeBlockAborts) {
  BlockAllocator a(2);
  EXPECT_DEATH(a.retain(1), "retain of a free block");
}

TEST(BlockAllocatorDeathTest, OutOfRangeIdAborts) {
  BlockAllocator a(2);
  EXPECT_DEATH(a.release(2), "out of range");
}

}  // namespace
}  // namespace tokenmill::kv
