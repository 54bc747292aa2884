// One sequence's block table for one KV layer group: which KV blocks hold
// its positions, and how many positions (slots) are reserved. Position p
// lives in logical block p / block_size, at slot p % block_size; the table
// holds the logical blocks [first_block(), first_block() + blocks().size()),
// so position p is in blocks()[p / block_size - first_block()].
//
// first_block() is 0 except in a sliding-window group: drop_before() releases
// the blocks whose every position has left the window, so such a table holds
// only the last ceil(window / block_size) + 1 blocks while decoding.
//
// Copy-on-write: blocks may be shared (fork() for parallel samples, prefix
// cache hits). Only the last, partially filled block is ever written; when it
// is shared, append_slots() gives this table a private copy: it allocates a
// new block, records {src, dst} for the engine (which must apply every copy
// with PagedKvStorage::copy_block, in the order recorded, BEFORE the forward
// pass that writes the block) and releases its reference to the shared one.
// The order matters: a source released here may be freed and handed out as
// a later copy's destination within the same step.
//
// The table owns one reference on each block it holds and releases them
// all when it is destroyed or assigned over (or by free()): a table cannot
// leak blocks. It is move-only; fork() is the explicit way to share. The
// allocator must outlive every table made from it.
//
// Thread-safety: none. Cost: append_slots is O(new blocks); fork and free are
// O(blocks).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kv/block_allocator.h"

namespace tokenmill::kv {

// A pending copy-on-write: copy all of block src's K/V into block dst.
struct BlockCopy {
  BlockId src = -1;
  BlockId dst = -1;
  bool operator==(const BlockCopy&) const = default;
};

class BlockTable {
 public:
  BlockTable() = default;  // holds nothing, belongs to no pool
  // Precondition: block_size > 0.
  BlockTable(BlockAllocator& allocator, int32_t block_size);
  ~BlockTable() { free(); }
  BlockTable(BlockTable&& other) noexcept;
  BlockTable& operator=(BlockTable&& other) noexcept;  // releases this table's blocks first
  BlockTable(const BlockTable&) = delete;
  BlockTable& operator=(const BlockTable&) = delete;

  int32_t block_size() const { return block_size_; }
  // The held blocks, logical blocks [first_block(), end_block()).
  const std::vector<BlockId>& blocks() const { return blocks_; }
  int64_t first_block() const { return first_block_; }
  int64_t end_block() const { return first_block_ + static_cast<int64_t>(blocks_.size()); }
  int64_t num_tokens() const { return num_tokens_; }  // reserved slots (dropped ones included)
  bool empty() const { return blocks_.empty(); }
  const BlockAllocator* allocator() const { return allocator_; }

  // Blocks that appending n slots would take from the allocator, counting
  // the copy-on-write of a shared last block.
  int64_t blocks_needed(int64_t n) const;
  // Most slots appendable with `available` blocks from the allocator.
  int64_t max_appendable(int64_t available) const;

  // Reserves n more slots, allocating blocks as needed and un-sharing the
  // last block if it will be written while shared (the copy is appended to
  // *copies). All or nothing: returns false and changes nothing when the
  // allocator cannot supply every block.
  bool append_slots(int64_t n, std::vector<BlockCopy>* copies);

  // Adopts full blocks whose references the caller already holds (prefix
  // cache hits) as logical blocks [first_block, first_block + blocks.size());
  // positions below first_block * block_size count as reserved but not held
  // (a sliding-window group). Precondition: the table is empty, first_block >= 0.
  void assign_prefix(std::span<const BlockId> blocks, int64_t first_block = 0);

  // Releases, oldest first, the held blocks whose every position is below
  // `pos` (they left the sliding window). Returns how many were released.
  // Precondition: pos <= num_tokens(). Cost: O(released).
  int64_t drop_before(int64_t pos);

  // Removes logical block k (a KV policy evicting the middle of a long
  // sequence): every later position moves down by block_size, so the table
  // then reserves num_tokens() - block_size slots. A block before
  // first_block() (already dropped from a window table) only renumbers the
  // held ones; a held one is released. The caller rotates the moved keys
  // if their positions must follow (kv_policy.h). Precondition: block k is
  // full, (k + 1) * block_size <= num_tokens(). Cost: O(blocks).
  void remove_block(int64_t k);
  // Gives this table a private copy of held block i (index into blocks())
  // when it is shared or published (another table or the prefix cache
  // reads it), so that it may be rewritten in place; the copy is appended
  // to *copies as in append_slots. False, changing nothing, when the
  // allocator has no block to give.
  bool make_private(size_t i, std::vector<BlockCopy>* copies);
  // Whether make_private(i) would need a block.
  bool is_shared(size_t i) const;

  // Gives back reserved slots from the end: keeps the first n, releasing
  // (last first) the held blocks wholly past them. For speculative decoding:
  // the slots of draft tokens the target rejected. Stale K/V left in a kept
  // block past n is overwritten before any step attends it. Precondition:
  // first_block() * block_size() <= n <= num_tokens().
  void truncate(int64_t n);

  // A second table sharing every block (each retained once more), for
  // parallel sampling.
  BlockTable fork() const;

  // Releases every block, last first (see block_table.cc), and empties the
  // table; it stays bound to its allocator.
  void free();

 private:
  BlockAllocator* allocator_ = nullptr;
  int32_t block_size_ = 16;
  int64_t num_tokens_ = 0;
  int64_t first_block_ = 0;  // logical index of blocks_[0]
  std::vector<BlockId> blocks_;
};

}  // namespace tokenmill::kv
