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
// Publishers and quotas: each entry remembers its publisher (an owner key,
// the scheduler's tenant), and publish() may bound how many entries one
// owner has in the index (referenced or evictable alike): at the bound, the
// owner's own least recently released evictable entry is dropped first;
// when it has none, the block is not published. Other owners' entries are
// never touched. A block whose parent is not indexed is never published
// (no lookup could reach it).
//
// Miss reasons (classify_misses, prefix_miss.h): besides the index, the
// cache keeps (1) a namespace-free content index (a second hash chain over
// the tokens alone, counted per entry) to tell a block cached under another
// namespace ("isolated") from one never seen, and (2) the hashes of the
// last 4 x pool-size evicted entries, to tell "evicted" from "no overlap".
// Both are approximate by design: an eviction older than the ring reads as
// no overlap. Cost: one more hash per published block, and the ring's
// memory (~40 bytes per remembered hash).
//
// Thread-safety: none; owned by the engine thread (through the Scheduler).
// Cost: hashing is O(tokens); lookups and publishes are O(blocks) hash-map
// operations (a quota eviction walks the evictable list: O(evictable)).
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "kv/block_allocator.h"
#include "kv/block_table.h"
#include "kv/prefix_miss.h"

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
  // The KV policy when it evicts (KvPolicy::describe); "" = full, which
  // leaves the id as it was before policies existed.
  std::string kv_policy;
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
  int64_t quota_evictions = 0;          // of evictions, made to keep an owner within its quota
  double hit_rate() const {
    const int64_t total = hit_tokens + miss_tokens;
    return total > 0 ? static_cast<double>(hit_tokens) / static_cast<double>(total) : 0.0;
  }
};

// Who publishes, and how many entries that owner may have in the index
// (0 = no bound). See "Publishers and quotas" above.
struct PublishQuota {
  uint64_t owner = 0;
  int64_t max_blocks = 0;
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
  // New entries belong to quota.owner and respect its bound.
  void publish(uint64_t ns, std::span<const int32_t> tokens, std::span<const BlockTable> tables,
               std::vector<BlockHash>* hashes, PublishQuota quota = {});

  // Why each of tokens [match.num_tokens, tokens.size()) is not served, for
  // a `match` that lookup(ns, tokens) just returned: every token counted
  // under exactly one reason (prefix_miss.h; never kLogprobsBypass, which
  // is the caller's). Cost: two hashes per block of `tokens`.
  PrefixMissCounts classify_misses(uint64_t ns, std::span<const int32_t> tokens, const PrefixMatch& match) const;
  // Entries of `owner` in the index now.
  int64_t owner_blocks(uint64_t owner) const;

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
    uint64_t owner = 0;           // PublishQuota::owner of the publisher
    BlockHash content;            // the namespace-free chain hash (content_index_)
  };
  struct HashOf {
    size_t operator()(const BlockHash& h) const {
      return static_cast<size_t>(h.low ^ (h.high * 0x9E3779B97F4A7C15ull));
    }
  };
  using Index = std::unordered_map<BlockHash, Entry, HashOf>;
  // The last `capacity` hashes inserted (a ring, and counts for lookups).
  class RecentHashes {
   public:
    explicit RecentHashes(size_t capacity) : ring_(capacity) {}
    void insert(const BlockHash& hash);
    bool contains(const BlockHash& hash) const { return counts_.count(hash) > 0; }

   private:
    std::vector<BlockHash> ring_;
    size_t next_ = 0;
    size_t size_ = 0;
    std::unordered_map<BlockHash, int32_t, HashOf> counts_;
  };

  // Whether the entry really holds these tokens after this parent (hash collisions).
  static bool entry_matches(const Entry& entry, uint64_t ns, const BlockHash* parent, std::span<const int32_t> tokens);
  void on_evict(size_t group, BlockId block);
  // Caches block `b` of group g >= 1 (if any and not cached yet) as `entry`'s.
  void attach_block(Entry& entry, size_t group, const BlockHash& hash, BlockId b);
  // The longest hit <= entries.size() blocks for which every group >= 1 has
  // the blocks the next token attends.
  size_t groups_limited_hit(const std::vector<const Entry*>& entries) const;
  // Indexes `block` (group 0) as a new entry owned by quota.owner.
  void add_entry(uint64_t ns, const BlockHash& hash, const BlockHash* parent, std::span<const int32_t> tokens,
                 BlockId block, const PublishQuota& quota);
  // Drops the owner's least recently released evictable entry (its blocks
  // go to the free lists). False when it has none.
  bool evict_oldest_of(uint64_t owner);
  // Removes an entry whose group-0 block is already unmarked: unmarks the
  // other groups' blocks, forgets it everywhere, remembers its hash as evicted.
  void drop_entry(Index::iterator it);
  PrefixMissReason miss_reason(uint64_t ns, const BlockHash& hash, const BlockHash& content) const;

  std::vector<CacheGroup> groups_;
  int32_t block_size_;
  bool enabled_;
  Index index_;
  std::unordered_map<BlockHash, int32_t, HashOf> content_index_;  // content hash -> entries
  std::unordered_map<uint64_t, int64_t> owner_blocks_;            // owner -> entries
  RecentHashes evicted_;
  // Per group, [num_blocks]: the entry hash of each cached block.
  std::vector<std::vector<BlockHash>> hash_of_block_;
  PrefixCacheStats stats_;
};

}  // namespace tokenmill::kv
