// Automatic prefix caching: full, computed KV blocks are indexed by a hash
// chain over their token ids, so a later prompt that starts with the same
// tokens (system prompts, chat history, recompute after preemption) reuses
// them instead of recomputing.
//
//   hash(block 0) = H(namespace, kRoot, tokens of block 0)
//   hash(block i) = H(namespace, hash(block i-1), tokens of block i)
//
// H is XXH3-128. The namespace (a 64-bit id, see CacheNamespace) separates
// everything that changes a block's K/V besides the tokens: model, tokenizer,
// adapter, RoPE, attention mask, KV dtype and the isolation domain. Each
// entry also stores its parent hash and its token ids, and a hit is verified
// against them, so a hash collision can only cost a miss, never wrong K/V.
//
// Blocks stay in the index while anyone references them and, once
// unreferenced, sit in the allocator's evictable LRU list until allocate()
// reclaims them (the allocator then calls back to drop the entry).
//
// Two KV layer groups (a model with sliding-window layers whose K/V live in
// their own pool, see docs/architecture.md): an entry then holds the block
// of each group for its span of tokens; the window block is optional. Each
// group's allocator evicts on its own: losing the full-attention block drops
// the entry (and un-caches its window block), losing the window block only
// clears that half. A hit of B blocks needs the full-attention blocks
// 0..B-1 and the window blocks of the positions the next token attends,
// [B * block_size - window + 1, B * block_size); lookup() returns the longest
// prefix for which both are cached.
//
// Thread-safety: none; owned by the engine thread (through the Scheduler).
// Cost: hashing is O(tokens); lookups and publishes are O(blocks) hash-map
// operations.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "kv/block_allocator.h"

namespace tokenmill::kv {

struct BlockHash {
  uint64_t low = 0;
  uint64_t high = 0;
  bool operator==(const BlockHash&) const = default;
};

// Every input besides the tokens that shapes a block's K/V. Two requests may
// share blocks only when all fields are equal.
struct CacheNamespace {
  std::string model;      // weights file identity + architecture
  std::string tokenizer;  // tokenizer identity
  std::string adapter;    // adapter id; "" = base model
  std::string rope;       // RoPE / position configuration
  std::string attention;  // mask mode: "causal", "sliding:4096", ...
  std::string kv_dtype;   // "f16", "f32", ...
  std::string isolation;  // "" = shared domain, else the tenant
};

// A 64-bit id of the namespace (XXH3-64 over the length-prefixed fields, so
// ("ab","c") and ("a","bc") differ).
uint64_t namespace_id(const CacheNamespace& ns);

// The longest cached prefix of full blocks.
struct PrefixMatch {
  std::vector<BlockId> blocks;
  std::vector<BlockHash> hashes;  // chain hash of each matched block
  int64_t num_tokens = 0;         // blocks.size() * block_size
  // Window group only: its blocks of logical blocks [window_first, blocks.size()).
  std::vector<BlockId> window_blocks;
  int64_t window_first = 0;
};

// The sliding-window layer group of a two-group cache.
struct WindowGroup {
  BlockAllocator* allocator = nullptr;  // null: one group
  int64_t window = 0;                   // positions a query attends, itself included
};

struct PrefixCacheStats {
  int64_t lookups = 0;      // acquire()/match() calls
  int64_t hit_tokens = 0;   // tokens served from the cache
  int64_t miss_tokens = 0;  // tokens of those queries not served
  int64_t blocks_held = 0;  // blocks in the index (referenced or evictable)
  int64_t evictions = 0;    // entries dropped to reuse their block
  int64_t window_blocks_held = 0;  // window-group blocks in the index
  double hit_rate() const {
    const int64_t total = hit_tokens + miss_tokens;
    return total > 0 ? static_cast<double>(hit_tokens) / static_cast<double>(total) : 0.0;
  }
};

class PrefixCache {
 public:
  // Registers itself as the allocators' eviction callback; the allocators
  // must outlive the cache. Preconditions: block_size > 0; window.window > 0
  // when window.allocator is set.
  PrefixCache(BlockAllocator& allocator, int32_t block_size, bool enabled = true, WindowGroup window = {});
  ~PrefixCache();
  PrefixCache(const PrefixCache&) = delete;
  PrefixCache& operator=(const PrefixCache&) = delete;

  // The chain hash of one block given its parent's (nullptr for block 0).
  // tokens: [block_size]
  static BlockHash hash_block(uint64_t ns, const BlockHash* parent, std::span<const int32_t> tokens);

  // The longest cached prefix of `tokens` in full blocks, capped so that the
  // last token is never covered (the model must compute at least one token
  // to produce logits): at most (tokens.size() - 1) / block_size blocks. No
  // side effects: no references taken, no counters. Empty when disabled.
  PrefixMatch lookup(uint64_t ns, std::span<const int32_t> tokens) const;
  // Takes one reference on every matched block (both groups) for the caller
  // (reviving evictable ones) and counts a lookup of num_query_tokens tokens.
  void acquire(const PrefixMatch& match, int64_t num_query_tokens);
  // lookup + acquire.
  PrefixMatch match(uint64_t ns, std::span<const int32_t> tokens);

  // Publishes the full blocks of a sequence whose K/V are computed.
  // tokens: [num_computed_tokens] of the sequence; blocks: its block table.
  // *hashes memoizes the chain: its first hashes->size() blocks are already
  // hashed (and published); it is extended to every full block, so calling
  // this after each step costs only the new blocks. A block whose content is
  // already indexed under another id is not published again (the sequence
  // keeps its private copy). window_blocks: the sequence's window-group
  // blocks of logical blocks [window_first, ...) (two groups only); a window
  // block also fills an indexed entry that lost its own. No-op when disabled.
  void publish(uint64_t ns, std::span<const int32_t> tokens, std::span<const BlockId> blocks,
               std::vector<BlockHash>* hashes, std::span<const BlockId> window_blocks = {},
               int64_t window_first = 0);

  // Disabling drops every entry (evictable blocks return to the free list).
  void set_enabled(bool enabled);
  bool enabled() const { return enabled_; }
  // Drops every entry; referenced blocks stay with their holders.
  void clear();

  PrefixCacheStats stats() const;
  int32_t block_size() const { return block_size_; }

 private:
  struct Entry {
    BlockId block = -1;
    BlockId window_block = -1;  // -1: none (one group, or evicted)
    uint64_t ns = 0;
    BlockHash parent;
    bool has_parent = false;
    std::vector<int32_t> tokens;  // [block_size], verified on every hit
  };
  struct HashOf {
    size_t operator()(const BlockHash& h) const { return static_cast<size_t>(h.low ^ (h.high * 0x9E3779B97F4A7C15ull)); }
  };

  // Whether the entry really holds these tokens after this parent (hash collisions).
  static bool entry_matches(const Entry& entry, uint64_t ns, const BlockHash* parent, std::span<const int32_t> tokens);
  void on_evict(BlockId block);
  void on_window_evict(BlockId block);
  // Caches window block `wb` (if any and not cached yet) as `entry`'s.
  void attach_window_block(Entry& entry, const BlockHash& hash, BlockId wb);
  // The longest hit <= entries.size() blocks whose window blocks are all cached.
  size_t window_limited_hit(const std::vector<const Entry*>& entries) const;

  BlockAllocator& allocator_;
  WindowGroup window_;
  int32_t block_size_;
  bool enabled_;
  std::unordered_map<BlockHash, Entry, HashOf> index_;
  std::vector<BlockHash> hash_of_block_;  // [num_blocks]; valid where the block is cached
  std::vector<BlockHash> hash_of_window_block_;  // the same for the window allocator's blocks
  PrefixCacheStats stats_;
};

}  // namespace tokenmill::kv
