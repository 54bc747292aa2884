// BlockTable: slot accounting, all-or-nothing appends, fork sharing and the
// copy-on-write of a shared partial block (hand-computed expectations).
#include "kv/block_table.h"

#include <gtest/gtest.h>

#include <vector>

namespace tokenmill::kv {
namespace {

TEST(BlockTable, AppendAllocatesBlocksAsSlotsCrossBoundaries) {
  BlockAllocator a(8);
  BlockTable t(a, 4);
  std::vector<BlockCopy> copies;
  EXPECT_EQ(t.blocks_needed(5), 2);
  ASSERT_TRUE(t.append_slots(5, &copies));  // positions 0..4
  EXPECT_EQ(t.blocks(), (std::vector<BlockId>{0, 1}));
  EXPECT_EQ(t.num_tokens(), 5);
  EXPECT_EQ(t.blocks_needed(3), 0);  // slots 5..7 are in block 1
  EXPECT_EQ(t.blocks_needed(4), 1);
  ASSERT_TRUE(t.append_slots(3, &copies));
  EXPECT_EQ(t.blocks().size(), 2u);
  ASSERT_TRUE(t.append_slots(1, &copies));
  EXPECT_EQ(t.blocks(), (std::vector<BlockId>{0, 1, 2}));
  EXPECT_EQ(t.num_tokens(), 9);
  EXPECT_TRUE(copies.empty());
  t.free();
  EXPECT_TRUE(t.empty());
  EXPECT_EQ(a.num_free(), 8);
}

// Rejected draft tokens give their slots back: blocks wholly past the kept
// slots are released, a shared block only drops this table's reference, and
// appending again reuses the freed blocks.
TEST(BlockTable, TruncateGivesBackTheSlotsPastN) {
  BlockAllocator a(8);
  BlockTable t(a, 4);
  std::vector<BlockCopy> copies;
  ASSERT_TRUE(t.append_slots(6, &copies));  // blocks 0, 1
  BlockTable shared = t.fork();
  ASSERT_TRUE(t.append_slots(7, &copies));  // 13 slots: copy of block 1, then two more blocks
  EXPECT_EQ(t.blocks().size(), 4u);
  EXPECT_EQ(a.num_free(), 3);
  t.truncate(7);  // keeps blocks 0 and the private copy of 1
  EXPECT_EQ(t.num_tokens(), 7);
  EXPECT_EQ(t.blocks().size(), 2u);
  EXPECT_EQ(a.num_free(), 5);
  t.truncate(7);  // nothing to give back
  EXPECT_EQ(a.num_free(), 5);
  t.truncate(4);  // exactly one block
  EXPECT_EQ(t.blocks().size(), 1u);
  EXPECT_EQ(a.num_free(), 6);
  EXPECT_EQ(a.ref_count(t.blocks()[0]), 2);  // still shared with the fork
  t.truncate(0);
  EXPECT_TRUE(t.empty());
  EXPECT_EQ(a.ref_count(shared.blocks()[0]), 1);
  ASSERT_TRUE(t.append_slots(5, &copies));
  EXPECT_EQ(t.num_tokens(), 5);
  t.free();
  shared.free();
  EXPECT_EQ(a.num_free(), 8);
}

TEST(BlockTable, AppendIsAllOrNothing) {
  BlockAllocator a(2);
  BlockTable t(a, 4);
  std::vector<BlockCopy> copies;
  ASSERT_TRUE(t.append_slots(3, &copies));
  EXPECT_FALSE(t.append_slots(6, &copies));  // needs 2 more blocks, 1 left
  EXPECT_EQ(t.num_tokens(), 3);
  EXPECT_EQ(t.blocks().size(), 1u);
  EXPECT_EQ(a.num_free(), 1);
  EXPECT_EQ(t.max_appendable(a.num_available()), 5);  // 1 slack + 4
  ASSERT_TRUE(t.append_slots(5, &copies));
  t.free();
}

TEST(BlockTable, ForkSharesAndCopyOnWriteUnsharesThePartialBlock) {
  BlockAllocator a(8);
  BlockTable parent(a, 4);
  std::vector<BlockCopy> copies;
  ASSERT_TRUE(parent.append_slots(6, &copies));  // blocks {0, 1}; block 1 half full
  BlockTable child = parent.fork();
  EXPECT_EQ(child.blocks(), parent.blocks());
  EXPECT_EQ(child.num_tokens(), 6);
  EXPECT_EQ(a.ref_count(0), 2);
  EXPECT_EQ(a.ref_count(1), 2);
  // The parent writes position 6 (block 1, shared): it gets a copy.
  EXPECT_EQ(parent.blocks_needed(1), 1);
  EXPECT_EQ(parent.max_appendable(0), 0);
  ASSERT_TRUE(parent.append_slots(1, &copies));
  ASSERT_EQ(copies.size(), 1u);
  EXPECT_EQ(copies[0], (BlockCopy{1, 2}));
  EXPECT_EQ(parent.blocks(), (std::vector<BlockId>{0, 2}));
  EXPECT_EQ(a.ref_count(1), 1);
  EXPECT_EQ(a.ref_count(0), 2);  // full blocks stay shared
  // The child is now the only holder of block 1: it writes in place.
  ASSERT_TRUE(child.append_slots(2, &copies));
  EXPECT_EQ(copies.size(), 1u);
  EXPECT_EQ(child.blocks(), (std::vector<BlockId>{0, 1}));
  // Crossing into a fresh block needs no copy either.
  ASSERT_TRUE(child.append_slots(1, &copies));
  EXPECT_EQ(child.blocks(), (std::vector<BlockId>{0, 1, 3}));
  EXPECT_EQ(copies.size(), 1u);
  parent.free();
  child.free();
  EXPECT_EQ(a.num_free(), 8);
}

TEST(BlockTable, ForkAtBlockBoundaryNeedsNoCopy) {
  BlockAllocator a(4);
  BlockTable parent(a, 4);
  std::vector<BlockCopy> copies;
  ASSERT_TRUE(parent.append_slots(4, &copies));
  BlockTable child = parent.fork();
  ASSERT_TRUE(parent.append_slots(1, &copies));
  ASSERT_TRUE(child.append_slots(1, &copies));
  EXPECT_TRUE(copies.empty());
  EXPECT_EQ(parent.blocks(), (std::vector<BlockId>{0, 1}));
  EXPECT_EQ(child.blocks(), (std::vector<BlockId>{0, 2}));
  parent.free();
  child.free();
  EXPECT_EQ(a.num_free(), 4);
}

TEST(BlockTable, CopyOnWriteFailsCleanlyWhenThePoolIsDry) {
  BlockAllocator a(2);
  BlockTable parent(a, 4);
  std::vector<BlockCopy> copies;
  ASSERT_TRUE(parent.append_slots(2, &copies));
  BlockTable child = parent.fork();
  ASSERT_TRUE(std::optional<BlockId>(a.allocate()).has_value());  // exhaust the pool
  EXPECT_FALSE(parent.append_slots(1, &copies));
  EXPECT_TRUE(copies.empty());
  EXPECT_EQ(parent.blocks(), (std::vector<BlockId>{0}));
  EXPECT_EQ(a.ref_count(0), 2);
  parent.free();
  child.free();
  a.release(1);
  EXPECT_EQ(a.num_free(), 2);
}

TEST(BlockTable, AssignPrefixAdoptsFullBlocks) {
  BlockAllocator a(4);
  BlockTable t(a, 4);
  const std::vector<BlockId> prefix{*a.allocate(), *a.allocate()};
  t.assign_prefix(prefix);
  EXPECT_EQ(t.num_tokens(), 8);
  std::vector<BlockCopy> copies;
  ASSERT_TRUE(t.append_slots(1, &copies));
  EXPECT_EQ(t.blocks(), (std::vector<BlockId>{0, 1, 2}));
  t.free();
  EXPECT_EQ(a.num_free(), 4);
}

// A sliding-window table: drop_before releases whole blocks that left the
// window, oldest first; appends continue at the logical end; fork keeps the
// offset; assign_prefix can start past block 0.
TEST(BlockTable, DropBeforeReleasesBlocksThatLeftTheWindow) {
  BlockAllocator a(8);
  BlockTable t(a, 4);
  std::vector<BlockCopy> copies;
  ASSERT_TRUE(t.append_slots(10, &copies));  // blocks {0, 1, 2}, positions 0..9
  EXPECT_EQ(t.drop_before(3), 0);            // block 0 still holds position 3
  EXPECT_EQ(t.drop_before(4), 1);
  EXPECT_EQ(t.first_block(), 1);
  EXPECT_EQ(t.blocks(), (std::vector<BlockId>{1, 2}));
  EXPECT_EQ(a.ref_count(0), 0);
  EXPECT_EQ(t.num_tokens(), 10);
  EXPECT_EQ(t.blocks_needed(2), 0);  // slots 10, 11 are in block 2
  EXPECT_EQ(t.blocks_needed(3), 1);
  EXPECT_EQ(t.max_appendable(0), 2);
  ASSERT_TRUE(t.append_slots(3, &copies));  // position 12 opens logical block 3
  EXPECT_EQ(t.blocks(), (std::vector<BlockId>{1, 2, 0}));
  EXPECT_EQ(t.end_block(), 4);
  BlockTable child = t.fork();
  EXPECT_EQ(child.first_block(), 1);
  EXPECT_EQ(child.num_tokens(), 13);
  // The child writes position 13 into the shared last block: copy-on-write.
  ASSERT_TRUE(child.append_slots(1, &copies));
  ASSERT_EQ(copies.size(), 1u);
  EXPECT_EQ(copies[0], (BlockCopy{0, 3}));
  EXPECT_EQ(child.drop_before(13), 2);  // logical blocks 1 and 2 end at 8 and 12
  EXPECT_EQ(child.blocks(), (std::vector<BlockId>{3}));
  EXPECT_EQ(a.ref_count(1), 1);
  EXPECT_EQ(a.ref_count(2), 1);
  child.free();
  EXPECT_EQ(child.first_block(), 0);
  t.free();
  EXPECT_EQ(a.num_free(), 8);

  BlockTable hit(a, 4);
  const std::vector<BlockId> window{*a.allocate(), *a.allocate()};
  hit.assign_prefix(window, 3);  // logical blocks 3, 4 of a 20-position prefix
  EXPECT_EQ(hit.num_tokens(), 20);
  ASSERT_TRUE(hit.append_slots(1, &copies));
  EXPECT_EQ(hit.end_block(), 6);
  // Dropping everything a window of 1 no longer needs leaves an empty table
  // that still counts its positions.
  EXPECT_EQ(hit.drop_before(20), 2);
  EXPECT_EQ(hit.blocks().size(), 1u);
  hit.free();
  EXPECT_EQ(a.num_free(), 8);
}

// The table owns its references: dropping, moving over or assigning over a
// table releases exactly its blocks; a moved-from table holds nothing.
// A KV policy removes a block from the middle: later positions move down
// one block; a block already dropped from a window table only renumbers the
// held ones.
TEST(BlockTable, RemoveBlockReleasesItAndShiftsTheRest) {
  BlockAllocator a(16);
  BlockTable t(a, 4);
  ASSERT_TRUE(t.append_slots(18, nullptr));  // blocks 0-4, the last with 2 slots
  const std::vector<BlockId> before = t.blocks();
  t.remove_block(1);
  EXPECT_EQ(t.num_tokens(), 14);
  EXPECT_EQ(t.blocks(), (std::vector<BlockId>{before[0], before[2], before[3], before[4]}));
  EXPECT_EQ(a.ref_count(before[1]), 0);
  EXPECT_EQ(a.num_used(), 4);
  EXPECT_DEATH(t.remove_block(3), "");  // the partly filled last block
  t.drop_before(8);                     // a window table: logical blocks 0-1 leave
  EXPECT_EQ(t.first_block(), 2);
  t.remove_block(0);  // not held: the held blocks become logical 1..
  EXPECT_EQ(t.first_block(), 1);
  EXPECT_EQ(t.num_tokens(), 10);
  EXPECT_EQ(t.blocks(), (std::vector<BlockId>{before[3], before[4]}));
}

// make_private gives a table its own copy of a block another table (or the
// prefix cache) reads, so that it may rewrite it; an unshared one stays.
TEST(BlockTable, MakePrivateCopiesOnlySharedBlocks) {
  BlockAllocator a(8);
  BlockTable t(a, 4);
  ASSERT_TRUE(t.append_slots(8, nullptr));
  BlockTable other = t.fork();
  std::vector<BlockCopy> copies;
  EXPECT_TRUE(t.is_shared(0));
  ASSERT_TRUE(t.make_private(0, &copies));
  ASSERT_EQ(copies.size(), 1u);
  EXPECT_EQ(copies[0].src, other.blocks()[0]);
  EXPECT_EQ(copies[0].dst, t.blocks()[0]);
  EXPECT_FALSE(t.is_shared(0));
  other.free();
  EXPECT_FALSE(t.is_shared(1));
  ASSERT_TRUE(t.make_private(1, &copies));
  EXPECT_EQ(copies.size(), 1u);
  a.set_cached(t.blocks()[1], true);  // published: the prefix cache reads it
  EXPECT_TRUE(t.is_shared(1));
  BlockAllocator dry(2);
  BlockTable u(dry, 4);
  ASSERT_TRUE(u.append_slots(8, nullptr));
  BlockTable v = u.fork();
  EXPECT_FALSE(u.make_private(0, &copies));  // no block left for the copy
  EXPECT_EQ(u.blocks(), v.blocks());
}

TEST(BlockTable, ReleasesItsBlocksWhenDestroyedOrAssignedOver) {
  BlockAllocator a(8);
  std::vector<BlockCopy> copies;
  {
    BlockTable t(a, 4);
    ASSERT_TRUE(t.append_slots(9, &copies));
    EXPECT_EQ(a.num_used(), 3);
    BlockTable shared = t.fork();
    EXPECT_EQ(a.ref_count(t.blocks()[0]), 2);
  }
  EXPECT_EQ(a.num_used(), 0);

  BlockTable first(a, 4);
  ASSERT_TRUE(first.append_slots(5, &copies));
  BlockTable moved(std::move(first));
  EXPECT_TRUE(first.empty());
  EXPECT_EQ(first.num_tokens(), 0);
  EXPECT_EQ(moved.num_tokens(), 5);
  EXPECT_EQ(a.num_used(), 2);
  BlockTable other(a, 4);
  ASSERT_TRUE(other.append_slots(1, &copies));
  other = std::move(moved);  // other's own block goes back first
  EXPECT_EQ(a.num_used(), 2);
  EXPECT_EQ(other.num_tokens(), 5);
  other = BlockTable();
  EXPECT_EQ(a.num_used(), 0);
  EXPECT_EQ(a.num_free(), 8);
}

}  // namespace
}  // namespace tokenmill::kv
