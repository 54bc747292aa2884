// The pool of KV block ids with reference counts: the capacity ledger of the
// paged KV cache (the bytes live in PagedKvStorage).
//
// Every block is in exactly one of three states:
//   free       refcount 0, on the free list;
//   used       refcount > 0 (held by block tables and/or prefix-cache hits);
//   evictable  refcount 0 but marked cached by the prefix cache: its K/V stay
//              valid for future hits until allocate() needs the block, which
//              then reclaims the least recently released one (LRU) and tells
//              the prefix cache through the eviction callback.
// num_free() + num_evictable() + num_used() == num_blocks() at all times.
//
// Blocks are plain int32 ids rather than RAII handles: block tables are
// vectors of ids that preemption, fork and copy-on-write rewrite in bulk, and
// an explicit release() keeps every refcount change visible at its call site.
// Misuse (double release, retaining a free block) is a broken invariant and
// aborts via TM_CHECK.
//
// Thread-safety: none; owned by the engine thread (through the Scheduler).
// Cost: every operation is O(1).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

namespace tokenmill::kv {

using BlockId = int32_t;

class BlockAllocator {
 public:
  // Called with a block that allocate() reclaims from the evictable set, just
  // before it is handed out again (the block is no longer marked cached).
  using EvictCallback = std::function<void(BlockId)>;

  // Throws Error when num_blocks <= 0.
  explicit BlockAllocator(int32_t num_blocks);

  // A block with refcount 1: a free block if any (a fresh pool hands out
  // 0, 1, 2, ...; released blocks are reused first), else the least recently
  // released evictable block. nullopt when neither exists.
  std::optional<BlockId> allocate();

  // refcount += 1. A refcount-0 block must be evictable (a prefix-cache hit
  // revives it); retaining a free block aborts.
  void retain(BlockId id);
  // refcount -= 1; at 0 the block becomes free, or evictable when cached.
  // Releasing a block with refcount 0 aborts (double free).
  void release(BlockId id);

  // Marks (or unmarks) a block as held by the prefix cache. Unmarking an
  // evictable block moves it to the free list.
  void set_cached(BlockId id, bool cached);
  // The least recently released evictable block for which pred(id) holds
  // (the prefix cache picks a tenant's own oldest block this way), or
  // nullopt. Cost: O(evictable blocks) in the worst case.
  std::optional<BlockId> find_evictable(const std::function<bool(BlockId)>& pred) const;
  void set_evict_callback(EvictCallback callback) { on_evict_ = std::move(callback); }

  int32_t ref_count(BlockId id) const;
  bool is_cached(BlockId id) const;
  bool is_evictable(BlockId id) const;  // cached and refcount 0

  int32_t num_blocks() const { return static_cast<int32_t>(ref_counts_.size()); }
  int32_t num_free() const { return static_cast<int32_t>(free_.size()); }
  int32_t num_evictable() const { return num_evictable_; }
  // What allocate() can still hand out: free + evictable.
  int32_t num_available() const { return num_free() + num_evictable_; }
  int32_t num_used() const { return num_blocks() - num_available(); }
  // Most blocks ever used at once since construction.
  int32_t high_water() const { return high_water_; }
  int64_t num_evictions() const { return num_evictions_; }

 private:
  void check_id(BlockId id) const;
  void lru_push_back(BlockId id);
  void lru_remove(BlockId id);

  std::vector<int32_t> ref_counts_;
  std::vector<uint8_t> cached_;
  std::vector<BlockId> free_;  // stack; back() is handed out next
  // Intrusive doubly linked LRU list of evictable blocks (-1 = none);
  // head is the least recently released.
  std::vector<BlockId> prev_, next_;
  BlockId lru_head_ = -1, lru_tail_ = -1;
  int32_t num_evictable_ = 0;
  int32_t high_water_ = 0;
  int64_t num_evictions_ = 0;
  EvictCallback on_evict_;
};

}  // namespace tokenmill::kv
