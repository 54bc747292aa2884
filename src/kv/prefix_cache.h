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
// Several KV layer groups (e.g. a model whose sliding-window layers keep
// their K/V in a pool of their own, see docs/architecture.md): an entry
// holds one block per group for its span of tokens. Group 0 is the primary
// one (full attention): its block is the entry, and losing it drops the
// entry and un-caches the other groups' blocks. The other groups' blocks are
// optional; each group's allocator evicts on its own and losing one only
// clears that slot. A hit of B blocks needs group 0's blocks 0..B-1 and, in
// every other group, the blocks of the positions the next token attends
// there ([B * block_size - window + 1, B * block_size) for a window, all of
// [0, B * block_size) without one); lookup() returns the longest prefix for
// which every group has them.
//
// Thread-safety: none; owned by the engine thread (through the Scheduler).
// Cost: hashing is O(tokens); lookups and publishes are O(blocks) hash-map
// operations.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "kv/block_allocator.h"
#include "kv/block_table.h"

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

// One group's share of a hit: its blocks of logical blocks
// [first, first + blocks.size()).
struct GroupBlocks {
  std::vector<BlockId> blocks;
  int64_t first = 0;
};

// The longest cached prefix of full blocks.
struct PrefixMatch {
  std::vector<BlockHash> hashes;    // chain hash of each matched block
  int64_t num_tokens = 0;           // hashes.size() * block_size
  std::vector<GroupBlocks> groups;  // one per cache group
  // Group 0's blocks (the whole prefix).
  std::span<const BlockId> blocks() const {
    return groups.empty() ? std::span<const BlockId>() : std::span<const BlockId>(groups[0].blocks);
  }
};

// A KV layer group as the cache sees it: its allocator, and how far back a
// query attends in it (positions, itself included; 0 = every position).
struct CacheGroup {
  BlockAllocator* allocator = nullptr;
  int64_t window = 0;
};

// The first logical block that a query at position `pos` attends in a group
// with this window (0 without a window).
inline int64_t first_attended_block(int64_t pos, int64_t window, int64_t block_size) {
  return window > 0 ? std::max<int64_t>(0, pos - window + 1) / block_size : 0;
}

struct PrefixCacheStats {
  int64_t lookups = 0;                  // acquire()/match() calls
  int64_t hit_tokens = 0;               // tokens served from the cache
  int64_t miss_tokens = 0;              // tokens of those queries not served
  int64_t blocks_held = 0;              // blocks in the index (referenced or evictable)
  int64_t evictions = 0;                // entries dropped to reuse their block
  int64_t other_group_blocks_held = 0;  // blocks of groups 1.. in the index
  double hit_rate() const {
    const int64_t total = hit_tokens + miss_tokens;
    return total > 0 ? static_cast<double>(hit_tokens) / static_cast<double>(total) : 0.0;
  }
};

class PrefixCache {
 public:
  // Registers itself as the allocators' eviction callback; the allocators
  // must outlive the cache. Preconditions: block_size > 0; at least one
  // group, every allocator set, group 0 without a window.
  PrefixCache(std::vector<CacheGroup> groups, int32_t block_size, bool enabled = true);
  // One group.
  PrefixCache(BlockAllocator& allocator, int32_t block_size, bool enabled = true)
      : PrefixCache(std::vector<CacheGroup>{{&allocator, 0}}, block_size, enabled) {}
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
  // Takes one reference on every matched block (every group) for the caller
  // (reviving evictable ones) and counts a lookup of num_query_tokens tokens.
  void acquire(const PrefixMatch& match, int64_t num_query_tokens);
  // lookup + acquire.
  PrefixMatch match(uint64_t ns, std::span<const int32_t> tokens);

  // Publishes the full blocks of a sequence whose K/V are computed.
  // tokens: [num_computed_tokens] of the sequence; tables: its block table
  // of each group (group order). *hashes memoizes the chain: its first
  // hashes->size() blocks are already hashed (and published); it is extended
  // to every full block, so calling this after each step costs only the new
  // blocks. A block whose content is already indexed under another id is
  // not published again (the sequence keeps its private copy); a block of
  // groups 1.. also fills an indexed entry that lost its own. No-op when
  // disabled.
  void publish(uint64_t ns, std::span<const int32_t> tokens, std::span<const BlockTable> tables,
               std::vector<BlockHash>* hashes);

  // Disabling drops every entry (evictable blocks return to the free list).
  void set_enabled(bool enabled);
  bool enabled() const { return enabled_; }
  // Drops every entry; referenced blocks stay with their holders.
  void clear();

  PrefixCacheStats stats() const;
  int32_t block_size() const { return block_size_; }
  size_t num_groups() const { return groups_.size(); }

 private:
  struct Entry {
    std::vector<BlockId> blocks;  // [groups]; -1 in groups 1.. where none is cached
    uint64_t ns = 0;
    BlockHash parent;
    bool has_parent = false;
    std::vector<int32_t> tokens;  // [block_size], verified on every hit
  };
  struct HashOf {
    size_t operator()(const BlockHash& h) const {
      return static_cast<size_t>(h.low ^ (h.high * 0x9E3779B97F4A7C15ull));
    }
  };

  // Whether the entry really holds these tokens after this parent (hash collisions).
  static bool entry_matches(const Entry& entry, uint64_t ns, const BlockHash* parent, std::span<const int32_t> tokens);
  void on_evict(size_t group, BlockId block);
  // Caches block `b` of group g >= 1 (if any and not cached yet) as `entry`'s.
  void attach_block(Entry& entry, size_t group, const BlockHash& hash, BlockId b);
  // The longest hit <= entries.size() blocks for which every group >= 1 has
  // the blocks the next token attends.
  size_t groups_limited_hit(const std::vector<const Entry*>& entries) const;

  std::vector<CacheGroup> groups_;
  int32_t block_size_;
  bool enabled_;
  std::unordered_map<BlockHash, Entry, HashOf> index_;
  // Per group, [num_blocks]: the entry hash of each cached block.
  std::vector<std::vector<BlockHash>> hash_of_block_;
  PrefixCacheStats stats_;
};

}  // namespace tokenmill::kv
