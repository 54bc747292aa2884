// PrefixCache: per-owner quotas (the owner's own oldest evictable blocks go
// first, other owners' never) and the miss reasons of classify_misses.
#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "kv/block_table.h"
#include "kv/prefix_cache.h"
#include "kv/prefix_cache_test_util.h"

namespace tokenmill::kv {
namespace {

using prefix_test::compute_and_publish;
using prefix_test::Computed;
using prefix_test::iota_tokens;
using prefix_test::kBlockSize;

std::vector<int32_t> plus_one(std::vector<int32_t> tokens) {
  tokens.push_back(1);
  return tokens;
}

int64_t reason(const PrefixMissCounts& m, PrefixMissReason r) { return m[static_cast<size_t>(r)]; }

int64_t total(const PrefixMissCounts& m, const PrefixMatch& match) {
  return match.num_tokens + std::accumulate(m.begin(), m.end(), int64_t{0});
}

TEST(PrefixCacheQuota, TheOwnersOldestEvictableBlockGoesFirst) {
  BlockAllocator a(16);
  PrefixCache cache(a, kBlockSize);
  const PublishQuota owner_a{1, 2}, owner_b{2, 0};
  const auto x = iota_tokens(4, 100), y = iota_tokens(4, 200), z = iota_tokens(4, 300), b = iota_tokens(8, 400);
  Computed cx = compute_and_publish(cache, a, 7, x, owner_a);
  Computed cy = compute_and_publish(cache, a, 7, y, owner_a);
  Computed cb = compute_and_publish(cache, a, 7, b, owner_b);
  cx.table.free();  // x is the least recently released
  cb.table.free();  // b's are older than y's, but not a's
  cy.table.free();
  EXPECT_EQ(cache.owner_blocks(1), 2);
  Computed cz = compute_and_publish(cache, a, 7, z, owner_a);
  EXPECT_EQ(cache.owner_blocks(1), 2);
  EXPECT_EQ(cache.owner_blocks(2), 2);
  EXPECT_EQ(cache.stats().quota_evictions, 1);
  EXPECT_EQ(cache.lookup(7, plus_one(x)).num_tokens, 0);
  EXPECT_EQ(cache.lookup(7, plus_one(y)).num_tokens, 4);
  EXPECT_EQ(cache.lookup(7, plus_one(b)).num_tokens, 8);
  EXPECT_EQ(cache.lookup(7, plus_one(z)).num_tokens, 4);
  cz.table.free();
}

// While all of an owner's blocks are referenced, a block beyond its quota
// is not published, nor anything after it (unreachable).
TEST(PrefixCacheQuota, AtTheBoundWithNothingEvictableNothingMoreIsPublished) {
  BlockAllocator a(16);
  PrefixCache cache(a, kBlockSize);
  const auto tokens = iota_tokens(16, 100);
  Computed c = compute_and_publish(cache, a, 7, tokens, {1, 2});
  EXPECT_EQ(c.hashes.size(), 4u);  // every block is hashed (the memo)
  EXPECT_EQ(cache.owner_blocks(1), 2);
  EXPECT_EQ(cache.stats().blocks_held, 2);
  EXPECT_EQ(cache.lookup(7, plus_one(tokens)).num_tokens, 8);
  const PrefixMatch m = cache.lookup(7, plus_one(tokens));
  const PrefixMissCounts misses = cache.classify_misses(7, plus_one(tokens), m);
  EXPECT_EQ(reason(misses, PrefixMissReason::kNoOverlap), 8);
  EXPECT_EQ(reason(misses, PrefixMissReason::kPartialBlock), 1);
  EXPECT_EQ(total(misses, m), 17);
  c.table.free();
}

TEST(PrefixCacheMisses, EachReasonInAConstructedScenario) {
  BlockAllocator a(8);
  PrefixCache cache(a, kBlockSize);
  const auto t = iota_tokens(12, 100);  // 3 blocks
  Computed c = compute_and_publish(cache, a, 1, t);
  c.table.free();

  // Hit 3 blocks; 3 trailing tokens.
  auto longer = t;
  longer.insert(longer.end(), {1, 2, 3});
  PrefixMatch m = cache.lookup(1, longer);
  PrefixMissCounts r = cache.classify_misses(1, longer, m);
  EXPECT_EQ(m.num_tokens, 12);
  EXPECT_EQ(reason(r, PrefixMissReason::kPartialBlock), 3);
  EXPECT_EQ(total(r, m), 15);

  // Exactly 3 blocks: the last is beyond the lookup's reach.
  m = cache.lookup(1, t);
  r = cache.classify_misses(1, t, m);
  EXPECT_EQ(m.num_tokens, 8);
  EXPECT_EQ(reason(r, PrefixMissReason::kPartialBlock), 4);

  // The same tokens under another namespace.
  m = cache.lookup(2, plus_one(t));
  r = cache.classify_misses(2, plus_one(t), m);
  EXPECT_EQ(m.num_tokens, 0);
  EXPECT_EQ(reason(r, PrefixMissReason::kIsolated), 12);
  EXPECT_EQ(reason(r, PrefixMissReason::kPartialBlock), 1);

  // Tokens no block ever held.
  const auto fresh = iota_tokens(9, 900);
  m = cache.lookup(1, fresh);
  r = cache.classify_misses(1, fresh, m);
  EXPECT_EQ(reason(r, PrefixMissReason::kNoOverlap), 8);
  EXPECT_EQ(reason(r, PrefixMissReason::kPartialBlock), 1);
  EXPECT_EQ(total(r, m), 9);

  // Fill the pool: every cached block is evicted, and remembered.
  std::vector<BlockId> held;
  for (int i = 0; i < 8; ++i) held.push_back(*a.allocate());
  EXPECT_EQ(cache.stats().blocks_held, 0);
  m = cache.lookup(1, plus_one(t));
  r = cache.classify_misses(1, plus_one(t), m);
  EXPECT_EQ(reason(r, PrefixMissReason::kEvicted), 12);
  EXPECT_EQ(total(r, m), 13);
  for (BlockId b : held) a.release(b);

  cache.set_enabled(false);
  m = cache.lookup(1, plus_one(t));
  r = cache.classify_misses(1, plus_one(t), m);
  EXPECT_EQ(reason(r, PrefixMissReason::kDisabled), 13);
}

// One block of a chain evicted: the blocks after it are still indexed but
// unreachable, and count as evicted too.
TEST(PrefixCacheMisses, ABrokenChainCountsAsEvicted) {
  BlockAllocator a(4);
  PrefixCache cache(a, kBlockSize);
  const auto t = iota_tokens(12, 100);
  Computed c = compute_and_publish(cache, a, 1, t);
  c.table.free();
  const BlockId taken = *a.allocate();    // the one free block
  const BlockId evicted = *a.allocate();  // the least recently released cached one
  EXPECT_EQ(cache.stats().blocks_held, 2);
  const PrefixMatch m = cache.lookup(1, plus_one(t));
  const PrefixMissCounts r = cache.classify_misses(1, plus_one(t), m);
  EXPECT_EQ(m.num_tokens + reason(r, PrefixMissReason::kEvicted), 12);
  EXPECT_GE(reason(r, PrefixMissReason::kEvicted), 4);
  EXPECT_EQ(total(r, m), 13);
  a.release(taken);
  a.release(evicted);
}

}  // namespace
}  // namespace tokenmill::kv
