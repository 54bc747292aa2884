#include "kv/block_allocator.h"

#include <algorithm>

#include "util/check.h"
#include "util/error.h"

namespace tokenmill::kv {

BlockAllocator::BlockAllocator(int32_t num_blocks) {
  if (num_blocks <= 0) fail("KV block pool needs at least one block, got {}", num_blocks);
  ref_counts_.assign(static_cast<size_t>(num_blocks), 0);
  cached_.assign(static_cast<size_t>(num_blocks), 0);
  prev_.assign(static_cast<size_t>(num_blocks), -1);
  next_.assign(static_cast<size_t>(num_blocks), -1);
  free_.reserve(static_cast<size_t>(num_blocks));
  for (BlockId id = num_blocks - 1; id >= 0; --id) free_.push_back(id);
}

void BlockAllocator::check_id(BlockId id) const { TM_CHECK_MSG(id >= 0 && id < num_blocks(), "block id out of range"); }

std::optional<BlockId> BlockAllocator::allocate() {
  BlockId id = -1;
  if (!free_.empty()) {
    id = free_.back();
    free_.pop_back();
  } else if (lru_head_ >= 0) {
    id = lru_head_;
    lru_remove(id);
    cached_[id] = 0;
    ++num_evictions_;
    if (on_evict_) on_evict_(id);
  } else {
    return std::nullopt;
  }
  TM_CHECK(ref_counts_[id] == 0);
  ref_counts_[id] = 1;
  high_water_ = std::max(high_water_, num_used());
  return id;
}

void BlockAllocator::retain(BlockId id) {
  check_id(id);
  if (ref_counts_[id] == 0) {
    TM_CHECK_MSG(cached_[id], "retain of a free block");
    lru_remove(id);
  }
  ++ref_counts_[id];
  high_water_ = std::max(high_water_, num_used());
}

void BlockAllocator::release(BlockId id) {
  check_id(id);
  TM_CHECK_MSG(ref_counts_[id] > 0, "double free of a KV block");
  if (--ref_counts_[id] > 0) return;
  if (cached_[id]) {
    lru_push_back(id);
  } else {
    free_.push_back(id);
  }
}

void BlockAllocator::set_cached(BlockId id, bool cached) {
  check_id(id);
  if (static_cast<bool>(cached_[id]) == cached) return;
  cached_[id] = cached ? 1 : 0;
  if (ref_counts_[id] > 0) return;
  // Only an evictable block can be unmarked at refcount 0; marking a free
  // block would leave it both free and cached.
  TM_CHECK_MSG(!cached, "cannot cache a free block");
  lru_remove(id);
  free_.push_back(id);
}

std::optional<BlockId> BlockAllocator::find_evictable(const std::function<bool(BlockId)>& pred) const {
  for (BlockId id = lru_head_; id >= 0; id = next_[id]) {
    if (pred(id)) return id;
  }
  return std::nullopt;
}

int32_t BlockAllocator::ref_count(BlockId id) const {
  check_id(id);
  return ref_counts_[id];
}

bool BlockAllocator::is_cached(BlockId id) const {
  check_id(id);
  return cached_[id] != 0;
}

bool BlockAllocator::is_evictable(BlockId id) const {
  check_id(id);
  return cached_[id] != 0 && ref_counts_[id] == 0;
}

void BlockAllocator::lru_push_back(BlockId id) {
  prev_[id] = lru_tail_;
  next_[id] = -1;
  if (lru_tail_ >= 0) {
    next_[lru_tail_] = id;
  } else {
    lru_head_ = id;
  }
  lru_tail_ = id;
  ++num_evictable_;
}

void BlockAllocator::lru_remove(BlockId id) {
  const BlockId p = prev_[id];
  const BlockId n = next_[id];
  if (p >= 0) {
    next_[p] = n;
  } else {
    TM_CHECK(lru_head_ == id);
    lru_head_ = n;
  }
  if (n >= 0) {
    prev_[n] = p;
  } else {
    TM_CHECK(lru_tail_ == id);
    lru_tail_ = p;
  }
  prev_[id] = next_[id] = -1;
  --num_evictable_;
}

}  // namespace tokenmill::kv
