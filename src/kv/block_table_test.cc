// BlockTable: slot accounting, all-or-nothing appends, fork sharing and the
// copy-on-write of a shared partial block (hand-computed expectations).
#include "kv/block_table.h"

#include <gtest/gtest.h>

#include <vector>

namespace tokenmill::kv {
namespace {

TEST(BlockTable, AppendAllocatesBlocksAsSlotsCrossBoundaries) {
  BlockAllocator a(8);
  BlockTable t(4);
  std::vector<BlockCopy> copies;
  EXPECT_EQ(t.blocks_needed(5, a), 2);
  ASSERT_TRUE(t.append_slots(5, a, &copies));  // positions 0..4
  EXPECT_EQ(t.blocks(), (std::vector<BlockId>{0, 1}));
  EXPECT_EQ(t.num_tokens(), 5);
  EXPECT_EQ(t.blocks_needed(3, a), 0);  // slots 5..7 are in block 1
  EXPECT_EQ(t.blocks_needed(4, a), 1);
  ASSERT_TRUE(t.append_slots(3, a, &copies));
  EXPECT_EQ(t.blocks().size(), 2u);
  ASSERT_TRUE(t.append_slots(1, a, &copies));
  EXPECT_EQ(t.blocks(), (std::vector<BlockId>{0, 1, 2}));
  EXPECT_EQ(t.num_tokens(), 9);
  EXPECT_TRUE(copies.empty());
  t.free(a);
  EXPECT_TRUE(t.empty());
  EXPECT_EQ(a.num_free(), 8);
}

TEST(BlockTable, AppendIsAllOrNothing) {
  BlockAllocator a(2);
  BlockTable t(4);
  std::vector<BlockCopy> copies;
  ASSERT_TRUE(t.append_slots(3, a, &copies));
  EXPECT_FALSE(t.append_slots(6, a, &copies));  // needs 2 more blocks, 1 left
  EXPECT_EQ(t.num_tokens(), 3);
  EXPECT_EQ(t.blocks().size(), 1u);
  EXPECT_EQ(a.num_free(), 1);
  EXPECT_EQ(t.max_appendable(a.num_available(), a), 5);  // 1 slack + 4
  ASSERT_TRUE(t.append_slots(5, a, &copies));
  t.free(a);
}

TEST(BlockTable, ForkSharesAndCopyOnWriteUnsharesThePartialBlock) {
  BlockAllocator a(8);
  BlockTable parent(4);
  std::vector<BlockCopy> copies;
  ASSERT_TRUE(parent.append_slots(6, a, &copies));  // blocks {0, 1}; block 1 half full
  BlockTable child = parent.fork(a);
  EXPECT_EQ(child.blocks(), parent.blocks());
  EXPECT_EQ(child.num_tokens(), 6);
  EXPECT_EQ(a.ref_count(0), 2);
  EXPECT_EQ(a.ref_count(1), 2);
  // The parent writes position 6 (block 1, shared): it gets a copy.
  EXPECT_EQ(parent.blocks_needed(1, a), 1);
  EXPECT_EQ(parent.max_appendable(0, a), 0);
  ASSERT_TRUE(parent.append_slots(1, a, &copies));
  ASSERT_EQ(copies.size(), 1u);
  EXPECT_EQ(copies[0], (BlockCopy{1, 2}));
  EXPECT_EQ(parent.blocks(), (std::vector<BlockId>{0, 2}));
  EXPECT_EQ(a.ref_count(1), 1);
  EXPECT_EQ(a.ref_count(0), 2);  // full blocks stay shared
  // The child is now the only holder of block 1: it writes in place.
  ASSERT_TRUE(child.append_slots(2, a, &copies));
  EXPECT_EQ(copies.size(), 1u);
  EXPECT_EQ(child.blocks(), (std::vector<BlockId>{0, 1}));
  // Crossing into a fresh block needs no copy either.
  ASSERT_TRUE(child.append_slots(1, a, &copies));
  EXPECT_EQ(child.blocks(), (std::vector<BlockId>{0, 1, 3}));
  EXPECT_EQ(copies.size(), 1u);
  parent.free(a);
  child.free(a);
  EXPECT_EQ(a.num_free(), 8);
}

TEST(BlockTable, ForkAtBlockBoundaryNeedsNoCopy) {
  BlockAllocator a(4);
  BlockTable parent(4);
  std::vector<BlockCopy> copies;
  ASSERT_TRUE(parent.append_slots(4, a, &copies));
  BlockTable child = parent.fork(a);
  ASSERT_TRUE(parent.append_slots(1, a, &copies));
  ASSERT_TRUE(child.append_slots(1, a, &copies));
  EXPECT_TRUE(copies.empty());
  EXPECT_EQ(parent.blocks(), (std::vector<BlockId>{0, 1}));
  EXPECT_EQ(child.blocks(), (std::vector<BlockId>{0, 2}));
  parent.free(a);
  child.free(a);
  EXPECT_EQ(a.num_free(), 4);
}

TEST(BlockTable, CopyOnWriteFailsCleanlyWhenThePoolIsDry) {
  BlockAllocator a(2);
  BlockTable parent(4);
  std::vector<BlockCopy> copies;
  ASSERT_TRUE(parent.append_slots(2, a, &copies));
  BlockTable child = parent.fork(a);
  ASSERT_TRUE(std::optional<BlockId>(a.allocate()).has_value());  // exhaust the pool
  EXPECT_FALSE(parent.append_slots(1, a, &copies));
  EXPECT_TRUE(copies.empty());
  EXPECT_EQ(parent.blocks(), (std::vector<BlockId>{0}));
  EXPECT_EQ(a.ref_count(0), 2);
  parent.free(a);
  child.free(a);
  a.release(1);
  EXPECT_EQ(a.num_free(), 2);
}

TEST(BlockTable, AssignPrefixAdoptsFullBlocks) {
  BlockAllocator a(4);
  BlockTable t(4);
  const std::vector<BlockId> prefix{*a.allocate(), *a.allocate()};
  t.assign_prefix(prefix);
  EXPECT_EQ(t.num_tokens(), 8);
  std::vector<BlockCopy> copies;
  ASSERT_TRUE(t.append_slots(1, a, &copies));
  EXPECT_EQ(t.blocks(), (std::vector<BlockId>{0, 1, 2}));
  t.free(a);
  EXPECT_EQ(a.num_free(), 4);
}

}  // namespace
}  // namespace tokenmill::kv
