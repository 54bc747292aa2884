// PrefixCache: sharing of identical prefixes, the last-token cap, namespace
// separation per component, LRU eviction order, counters, enable switch.
#include "kv/prefix_cache.h"

#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "kv/block_table.h"
#include "kv/prefix_cache_test_util.h"

namespace tokenmill::kv {
namespace {

using prefix_test::compute_and_publish;
using prefix_test::Computed;
using prefix_test::iota_tokens;
using prefix_test::kBlockSize;

TEST(PrefixCache, IdenticalPromptsShareFullBlocks) {
  BlockAllocator a(16);
  PrefixCache cache(a, kBlockSize);
  const auto tokens = iota_tokens(10);  // 2 full blocks + 2 tokens
  Computed first = compute_and_publish(cache, a, 7, tokens);
  EXPECT_EQ(first.hashes.size(), 2u);  // the partial block is not published
  EXPECT_EQ(cache.stats().blocks_held, 2);

  const PrefixMatch m = cache.match(7, tokens);
  EXPECT_EQ(m.num_tokens, 8);
  EXPECT_EQ(m.groups[0].blocks, (std::vector<BlockId>{first.table.blocks()[0], first.table.blocks()[1]}));
  EXPECT_EQ(m.hashes, first.hashes);
  EXPECT_EQ(a.ref_count(m.groups[0].blocks[0]), 2);  // retained for the caller

  // A prompt diverging inside block 1 matches block 0 only.
  auto other = tokens;
  other[6] = 9999;
  const PrefixMatch m2 = cache.match(7, other);
  EXPECT_EQ(m2.num_tokens, 4);
  // Diverging in block 0 means no match even though block 1 is equal.
  other = tokens;
  other[0] = 9999;
  EXPECT_EQ(cache.lookup(7, other).num_tokens, 0);

  for (BlockId b : m.groups[0].blocks) a.release(b);
  for (BlockId b : m2.groups[0].blocks) a.release(b);
  first.table.free();
  EXPECT_EQ(a.num_used(), 0);
  EXPECT_EQ(a.num_evictable(), 2);
  EXPECT_EQ(a.num_available(), 16);
}

TEST(PrefixCache, NeverCoversTheLastToken) {
  BlockAllocator a(16);
  PrefixCache cache(a, kBlockSize);
  const auto tokens = iota_tokens(8);  // exactly 2 full blocks
  Computed c = compute_and_publish(cache, a, 1, tokens);
  // The same 8 tokens: the cap (8 - 1) / 4 = 1 block leaves 4 tokens to compute.
  EXPECT_EQ(cache.lookup(1, tokens).num_tokens, 4);
  // 9 tokens: (9 - 1) / 4 = 2 blocks, 1 token left.
  auto longer = tokens;
  longer.push_back(5);
  EXPECT_EQ(cache.lookup(1, longer).num_tokens, 8);
  // 1 token: nothing.
  EXPECT_EQ(cache.lookup(1, std::vector<int32_t>{100}).num_tokens, 0);
  EXPECT_EQ(cache.lookup(1, std::vector<int32_t>{}).num_tokens, 0);
  c.table.free();
}

TEST(PrefixCache, NamespaceIdDiffersInEveryComponent) {
  const CacheNamespace base{"model-a", "tok-a", "", "rope:10000", "causal", "f16", ""};
  const uint64_t id = namespace_id(base);
  EXPECT_EQ(namespace_id(base), id);  // deterministic
  std::vector<CacheNamespace> variants(7, base);
  variants[0].model = "model-b";
  variants[1].tokenizer = "tok-b";
  variants[2].adapter = "lora-1";
  variants[3].rope = "rope:500000";
  variants[4].attention = "sliding:4096";
  variants[5].kv_dtype = "f32";
  variants[6].isolation = "tenant-x";
  std::vector<uint64_t> ids{id};
  for (const CacheNamespace& v : variants) ids.push_back(namespace_id(v));
  for (size_t i = 0; i < ids.size(); ++i) {
    for (size_t j = i + 1; j < ids.size(); ++j) EXPECT_NE(ids[i], ids[j]) << i << " vs " << j;
  }
  // Field boundaries matter.
  CacheNamespace shifted = base;
  shifted.model = "model-at";
  shifted.tokenizer = "ok-a";
  EXPECT_NE(namespace_id(shifted), id);
}

TEST(PrefixCache, DifferentNamespacesNeverShare) {
  const CacheNamespace base{"model-a", "tok-a", "", "rope:10000", "causal", "f16", ""};
  std::vector<CacheNamespace> variants(7, base);
  variants[0].model = "model-b";
  variants[1].tokenizer = "tok-b";
  variants[2].adapter = "lora-1";
  variants[3].rope = "rope:500000";
  variants[4].attention = "sliding:4096";
  variants[5].kv_dtype = "f32";
  variants[6].isolation = "tenant-x";
  BlockAllocator a(64);
  PrefixCache cache(a, kBlockSize);
  const auto tokens = iota_tokens(9);
  Computed c = compute_and_publish(cache, a, namespace_id(base), tokens);
  EXPECT_EQ(cache.lookup(namespace_id(base), tokens).num_tokens, 8);
  for (size_t i = 0; i < variants.size(); ++i) {
    EXPECT_EQ(cache.lookup(namespace_id(variants[i]), tokens).num_tokens, 0) << "component " << i;
  }
  // The same content published in another namespace is a separate entry.
  Computed d = compute_and_publish(cache, a, namespace_id(variants[6]), tokens);
  EXPECT_EQ(cache.stats().blocks_held, 4);
  EXPECT_EQ(cache.lookup(namespace_id(variants[6]), tokens).groups[0].blocks,
            (std::vector<BlockId>{d.table.blocks()[0], d.table.blocks()[1]}));
  c.table.free();
  d.table.free();
}

TEST(PrefixCache, DuplicateContentIsNotPublishedTwice) {
  BlockAllocator a(16);
  PrefixCache cache(a, kBlockSize);
  const auto tokens = iota_tokens(8);
  Computed c1 = compute_and_publish(cache, a, 1, tokens);
  Computed c2 = compute_and_publish(cache, a, 1, tokens);  // computed concurrently, not via a hit
  EXPECT_EQ(cache.stats().blocks_held, 2);
  EXPECT_EQ(c2.hashes, c1.hashes);
  EXPECT_FALSE(a.is_cached(c2.table.blocks()[0]));
  c1.table.free();
  c2.table.free();
  EXPECT_EQ(a.num_evictable(), 2);
  EXPECT_EQ(a.num_free(), 14);
}

TEST(PrefixCache, EvictsLeastRecentlyUsedAndForgetsEvictedBlocks) {
  BlockAllocator a(4);
  PrefixCache cache(a, kBlockSize);
  const auto p1 = iota_tokens(5, 0), p2 = iota_tokens(5, 10), p3 = iota_tokens(5, 20);
  Computed c1 = compute_and_publish(cache, a, 1, p1);  // block 0 cached, block 1 partial
  Computed c2 = compute_and_publish(cache, a, 1, p2);  // blocks 2 (cached), 3
  c1.table.free();                                     // block 0 evictable, block 1 free
  c2.table.free();                                     // block 2 evictable, block 3 free
  Computed c3 = compute_and_publish(cache, a, 1, p3);  // takes the two free blocks
  EXPECT_EQ(cache.stats().blocks_held, 3);
  c3.table.free();
  // LRU order now: p1's block, p2's block, p3's block. A hit on p1 refreshes it.
  PrefixMatch hit = cache.match(1, p1);
  ASSERT_EQ(hit.num_tokens, 4);
  for (BlockId b : hit.groups[0].blocks) a.release(b);
  // Three fresh allocations: one free block, then evict p2's, then p3's.
  std::vector<BlockId> taken;
  for (int i = 0; i < 3; ++i) taken.push_back(*a.allocate());
  EXPECT_EQ(cache.stats().evictions, 2);
  EXPECT_EQ(cache.lookup(1, p2).num_tokens, 0);
  EXPECT_EQ(cache.lookup(1, p3).num_tokens, 0);
  EXPECT_EQ(cache.lookup(1, p1).num_tokens, 4);
  EXPECT_EQ(cache.stats().blocks_held, 1);
  for (BlockId b : taken) a.release(b);
  EXPECT_EQ(a.num_available(), 4);
}

TEST(PrefixCache, CountsLookupsHitsAndMisses) {
  BlockAllocator a(16);
  PrefixCache cache(a, kBlockSize);
  const auto tokens = iota_tokens(10);
  Computed c = compute_and_publish(cache, a, 1, tokens);
  EXPECT_EQ(cache.stats().lookups, 0);
  PrefixMatch m1 = cache.match(1, tokens);               // 8 hit, 2 miss
  PrefixMatch m2 = cache.match(1, iota_tokens(6, 500));  // 0 hit, 6 miss
  (void)cache.lookup(1, tokens);                         // not counted
  const PrefixCacheStats s = cache.stats();
  EXPECT_EQ(s.lookups, 2);
  EXPECT_EQ(s.hit_tokens, 8);
  EXPECT_EQ(s.miss_tokens, 8);
  EXPECT_DOUBLE_EQ(s.hit_rate(), 0.5);
  for (BlockId b : m1.groups[0].blocks) a.release(b);
  c.table.free();
}

TEST(PrefixCache, DisabledCacheNeitherMatchesNorPublishes) {
  BlockAllocator a(16);
  PrefixCache cache(a, kBlockSize);
  const auto tokens = iota_tokens(9);
  Computed c = compute_and_publish(cache, a, 1, tokens);
  c.table.free();
  EXPECT_EQ(a.num_evictable(), 2);
  cache.set_enabled(false);
  EXPECT_EQ(a.num_evictable(), 0);  // dropped entries return to the free list
  EXPECT_EQ(a.num_free(), 16);
  EXPECT_EQ(cache.lookup(1, tokens).num_tokens, 0);
  Computed d = compute_and_publish(cache, a, 1, tokens);
  EXPECT_EQ(cache.stats().blocks_held, 0);
  d.table.free();
  cache.set_enabled(true);
  EXPECT_EQ(cache.lookup(1, tokens).num_tokens, 0);
}

TEST(PrefixCache, PublishIsIncremental) {
  BlockAllocator a(16);
  PrefixCache cache(a, kBlockSize);
  const auto tokens = iota_tokens(12);
  BlockTable t(a, kBlockSize);
  std::vector<BlockCopy> copies;
  ASSERT_TRUE(t.append_slots(12, &copies));
  std::vector<BlockHash> hashes;
  cache.publish(1, std::span(tokens).first(5), std::span<const BlockTable>(&t, 1), &hashes);
  EXPECT_EQ(hashes.size(), 1u);
  cache.publish(1, tokens, std::span<const BlockTable>(&t, 1), &hashes);
  EXPECT_EQ(hashes.size(), 3u);
  // The chain matches a from-scratch computation.
  const BlockHash h0 = PrefixCache::hash_block(1, nullptr, std::span(tokens).first(4));
  const BlockHash h1 = PrefixCache::hash_block(1, &h0, std::span(tokens).subspan(4, 4));
  EXPECT_EQ(hashes[0], h0);
  EXPECT_EQ(hashes[1], h1);
  EXPECT_EQ(cache.stats().blocks_held, 3);
  t.free();
}

// Two groups, window 5, blocks of 4: the first token after a hit of B
// blocks (position 4B) attends positions [4B - 4, 4B], so the hit needs the
// window block of logical block B - 1 besides the full blocks 0..B-1.
struct TwoGroups {
  BlockAllocator full{16};
  BlockAllocator window{8};
  PrefixCache cache{std::vector<CacheGroup>{{&full, 0}, {&window, 5}}, kBlockSize};
};

// A sequence that computed `tokens` into both groups and published them.
struct ComputedTwo {
  std::vector<BlockTable> tables;  // full, window
  std::vector<BlockHash> hashes;
  BlockTable& table() { return tables[0]; }
  BlockTable& wtable() { return tables[1]; }
};
ComputedTwo compute_two(TwoGroups& g, const std::vector<int32_t>& tokens) {
  ComputedTwo c;
  c.tables.emplace_back(g.full, kBlockSize);
  c.tables.emplace_back(g.window, kBlockSize);
  std::vector<BlockCopy> copies;
  const int64_t n = static_cast<int64_t>(tokens.size());
  EXPECT_TRUE(c.table().append_slots(n, &copies));
  EXPECT_TRUE(c.wtable().append_slots(n, &copies));
  g.cache.publish(1, tokens, c.tables, &c.hashes);
  return c;
}

TEST(PrefixCache, TwoGroupsHitNeedsTheWindowBlocksBeforeTheBoundary) {
  TwoGroups g;
  const auto tokens = iota_tokens(17);  // 4 full blocks + 1
  ComputedTwo c = compute_two(g, tokens);
  EXPECT_EQ(g.cache.stats().blocks_held, 4);
  EXPECT_EQ(g.cache.stats().other_group_blocks_held, 4);
  PrefixMatch m = g.cache.lookup(1, tokens);
  EXPECT_EQ(m.num_tokens, 16);
  EXPECT_EQ(m.groups[1].first, 3);
  EXPECT_EQ(m.groups[1].blocks, (std::vector<BlockId>{c.wtable().blocks()[3]}));
  const BlockId last_window = c.wtable().blocks()[3];
  c.table().free();
  c.wtable().free();  // tail first: logical block 3's window block is evicted first

  std::vector<BlockId> taken;
  for (int i = 0; i < 4; ++i) taken.push_back(*g.window.allocate());  // the free blocks
  EXPECT_EQ(g.cache.stats().other_group_blocks_held, 4);
  taken.push_back(*g.window.allocate());
  EXPECT_EQ(taken.back(), last_window);
  EXPECT_EQ(g.cache.stats().other_group_blocks_held, 3);
  EXPECT_EQ(g.cache.stats().blocks_held, 4);  // the full-attention half stays
  m = g.cache.lookup(1, tokens);
  EXPECT_EQ(m.num_tokens, 12);  // boundary 12 needs logical block 2 (positions 8..11)
  EXPECT_EQ(m.groups[1].first, 2);
  ASSERT_EQ(m.groups[1].blocks.size(), 1u);
  g.cache.acquire(m, 17);  // one reference per block of both groups
  EXPECT_EQ(g.window.ref_count(m.groups[1].blocks[0]), 1);
  EXPECT_EQ(g.full.num_used(), 3);
  for (BlockId b : m.groups[0].blocks) g.full.release(b);
  for (BlockId b : m.groups[1].blocks) g.window.release(b);
  for (BlockId b : taken) g.window.release(b);

  // Recomputing the same prompt fills the entry's missing window block.
  ComputedTwo again = compute_two(g, tokens);
  EXPECT_EQ(g.cache.stats().blocks_held, 4);
  EXPECT_EQ(g.cache.stats().other_group_blocks_held, 4);
  EXPECT_EQ(g.cache.lookup(1, tokens).num_tokens, 16);
  again.table().free();
  again.wtable().free();
}

TEST(PrefixCache, TwoGroupsEvictingTheFullBlockUncachesItsWindowBlock) {
  TwoGroups g;
  const auto tokens = iota_tokens(9);  // 2 full blocks + 1
  ComputedTwo c = compute_two(g, tokens);
  c.table().free();
  c.wtable().free();
  EXPECT_EQ(g.window.num_evictable(), 2);
  // Take all 16 full blocks: the two cached ones are evicted and their
  // window halves go back to the free list.
  std::vector<BlockId> taken;
  for (int i = 0; i < 16; ++i) taken.push_back(*g.full.allocate());
  EXPECT_EQ(g.cache.stats().blocks_held, 0);
  EXPECT_EQ(g.window.num_evictable(), 0);
  EXPECT_EQ(g.window.num_free(), 8);
  EXPECT_EQ(g.cache.lookup(1, tokens).num_tokens, 0);
  for (BlockId b : taken) g.full.release(b);
}

// Three groups (a full one and windows of 5 and 9 positions, blocks of 4):
// a group is data, and a hit needs, in each windowed group, the blocks the
// next token attends there.
TEST(PrefixCache, ThreeGroupsHitNeedsEveryWindowedGroupsBlocks) {
  BlockAllocator full(16), narrow(8), wide(8);
  PrefixCache cache(std::vector<CacheGroup>{{&full, 0}, {&narrow, 5}, {&wide, 9}}, kBlockSize);
  const auto tokens = iota_tokens(17);  // 4 full blocks + 1
  std::vector<BlockTable> tables;
  tables.emplace_back(full, kBlockSize);
  tables.emplace_back(narrow, kBlockSize);
  tables.emplace_back(wide, kBlockSize);
  std::vector<BlockCopy> copies;
  for (BlockTable& t : tables) ASSERT_TRUE(t.append_slots(17, &copies));
  std::vector<BlockHash> hashes;
  cache.publish(1, tokens, tables, &hashes);
  EXPECT_EQ(cache.stats().other_group_blocks_held, 8);

  // Boundary 16: window 5 attends [12, 16] (logical block 3), window 9
  // attends [8, 16] (blocks 2 and 3).
  PrefixMatch m = cache.lookup(1, tokens);
  EXPECT_EQ(m.num_tokens, 16);
  ASSERT_EQ(m.groups.size(), 3u);
  EXPECT_EQ(m.groups[1].first, 3);
  EXPECT_EQ(m.groups[1].blocks, (std::vector<BlockId>{tables[1].blocks()[3]}));
  EXPECT_EQ(m.groups[2].first, 2);
  EXPECT_EQ(m.groups[2].blocks, (std::vector<BlockId>{tables[2].blocks()[2], tables[2].blocks()[3]}));

  // The wide group loses logical block 3 (released first, evicted first):
  // boundary 16 is gone, boundary 12 needs wide blocks 1 and 2 and narrow
  // block 2, all still cached.
  for (BlockTable& t : tables) t.free();
  std::vector<BlockId> taken;
  for (int i = 0; i < 4; ++i) taken.push_back(*wide.allocate());  // the free blocks
  taken.push_back(*wide.allocate());                              // evicts logical block 3
  m = cache.lookup(1, tokens);
  EXPECT_EQ(m.num_tokens, 12);
  EXPECT_EQ(m.groups[1].first, 2);
  EXPECT_EQ(m.groups[1].blocks.size(), 1u);
  EXPECT_EQ(m.groups[2].first, 1);
  EXPECT_EQ(m.groups[2].blocks.size(), 2u);
  for (BlockId b : taken) wide.release(b);
}

}  // namespace
}  // namespace tokenmill::kv
