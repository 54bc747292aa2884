#include "kv/prefix_cache.h"

#include <algorithm>
#include <cstring>
#include <optional>

#include "util/check.h"

// Header-only use of libxxhash (Debian libxxhash-dev): the hash functions are
// compiled into this file, so no link dependency is needed.
#define XXH_INLINE_ALL
#include <xxhash.h>

namespace tokenmill::kv {

namespace {

// Parent of block 0: a fixed, arbitrary value distinct from real hashes in
// practice (a real parent collides with it with probability 2^-128).
constexpr BlockHash kRoot{0x6a09e667f3bcc908ull, 0xbb67ae8584caa73bull};

// The namespace of the content chain (PrefixCache's content index): a
// fixed value, so the chain depends on the tokens alone.
constexpr uint64_t kContentNs = 0x3c6ef372fe94f82bull;

// How many evicted hashes the cache remembers per block of its primary pool.
constexpr size_t kEvictedPerBlock = 4;

void append_bytes(std::vector<uint8_t>& out, const void* data, size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
  out.insert(out.end(), p, p + n);
}

}  // namespace

uint64_t namespace_id(const CacheNamespace& ns) {
  std::vector<uint8_t> bytes;
  for (const std::string* field :
       {&ns.model, &ns.tokenizer, &ns.adapter, &ns.rope, &ns.attention, &ns.kv_dtype, &ns.isolation}) {
    const uint64_t size = field->size();
    append_bytes(bytes, &size, sizeof(size));
    append_bytes(bytes, field->data(), field->size());
  }
  if (!ns.kv_policy.empty()) {
    const uint64_t size = ns.kv_policy.size();
    append_bytes(bytes, &size, sizeof(size));
    append_bytes(bytes, ns.kv_policy.data(), ns.kv_policy.size());
  }
  return XXH3_64bits(bytes.data(), bytes.size());
}

void PrefixCache::RecentHashes::insert(const BlockHash& hash) {
  if (ring_.empty()) return;
  if (size_ == ring_.size()) {  // forget the oldest
    const auto it = counts_.find(ring_[next_]);
    if (--it->second == 0) counts_.erase(it);
  } else {
    ++size_;
  }
  ring_[next_] = hash;
  ++counts_[hash];
  next_ = (next_ + 1) % ring_.size();
}

static size_t evicted_capacity(const std::vector<CacheGroup>& groups) {
  TM_CHECK(!groups.empty() && groups[0].allocator != nullptr);
  return kEvictedPerBlock * static_cast<size_t>(groups[0].allocator->num_blocks());
}

PrefixCache::PrefixCache(std::vector<CacheGroup> groups, int32_t block_size, bool enabled)
    : groups_(std::move(groups)), block_size_(block_size), enabled_(enabled), evicted_(evicted_capacity(groups_)) {
  TM_CHECK(block_size > 0 && !groups_.empty() && groups_[0].window == 0);
  for (size_t g = 0; g < groups_.size(); ++g) {
    TM_CHECK(groups_[g].allocator != nullptr && groups_[g].window >= 0);
    hash_of_block_.emplace_back(static_cast<size_t>(groups_[g].allocator->num_blocks()));
    groups_[g].allocator->set_evict_callback([this, g](BlockId block) { on_evict(g, block); });
  }
}

PrefixCache::~PrefixCache() {
  clear();
  for (const CacheGroup& group : groups_) group.allocator->set_evict_callback(nullptr);
}

BlockHash PrefixCache::hash_block(uint64_t ns, const BlockHash* parent, std::span<const int32_t> tokens) {
  const BlockHash& p = parent != nullptr ? *parent : kRoot;
  XXH3_state_t state;
  XXH3_128bits_reset(&state);
  XXH3_128bits_update(&state, &ns, sizeof(ns));
  XXH3_128bits_update(&state, &p.low, sizeof(p.low));
  XXH3_128bits_update(&state, &p.high, sizeof(p.high));
  XXH3_128bits_update(&state, tokens.data(), tokens.size_bytes());
  const XXH128_hash_t h = XXH3_128bits_digest(&state);
  return BlockHash{h.low64, h.high64};
}

bool PrefixCache::entry_matches(const Entry& entry, uint64_t ns, const BlockHash* parent,
                                std::span<const int32_t> tokens) {
  const bool same_parent = parent != nullptr ? entry.has_parent && entry.parent == *parent : !entry.has_parent;
  return entry.ns == ns && same_parent &&
         std::equal(tokens.begin(), tokens.end(), entry.tokens.begin(), entry.tokens.end());
}

PrefixMatch PrefixCache::lookup(uint64_t ns, std::span<const int32_t> tokens) const {
  PrefixMatch match;
  match.groups.resize(groups_.size());
  if (!enabled_ || tokens.empty()) return match;
  std::vector<const Entry*> entries;
  const size_t max_blocks = (tokens.size() - 1) / static_cast<size_t>(block_size_);
  for (size_t i = 0; i < max_blocks; ++i) {
    const BlockHash* parent = i > 0 ? &match.hashes[i - 1] : nullptr;
    const std::span<const int32_t> block_tokens = tokens.subspan(i * block_size_, block_size_);
    const BlockHash hash = hash_block(ns, parent, block_tokens);
    const auto it = index_.find(hash);
    if (it == index_.end()) break;
    const Entry& entry = it->second;
    if (!entry_matches(entry, ns, parent, block_tokens)) break;  // a hash collision: treat as a miss
    match.hashes.push_back(hash);                                // invalidates parent; recomputed next iteration
    entries.push_back(&entry);
  }
  const size_t hit = groups_limited_hit(entries);
  match.hashes.resize(hit);
  match.num_tokens = static_cast<int64_t>(hit) * block_size_;
  for (size_t g = 0; g < groups_.size(); ++g) {
    GroupBlocks& out = match.groups[g];
    out.first = first_attended_block(match.num_tokens, groups_[g].window, block_size_);
    for (size_t i = static_cast<size_t>(out.first); i < hit; ++i) out.blocks.push_back(entries[i]->blocks[g]);
  }
  return match;
}

size_t PrefixCache::groups_limited_hit(const std::vector<const Entry*>& entries) const {
  size_t hit = entries.size();
  for (size_t g = 1; g < groups_.size() && hit > 0; ++g) {
    // run = how many consecutive entries ending at i have group g's block.
    std::vector<int64_t> run(hit);
    for (size_t i = 0; i < hit; ++i) run[i] = entries[i]->blocks[g] < 0 ? 0 : (i > 0 ? run[i - 1] : 0) + 1;
    size_t ok = hit;
    for (; ok > 0; --ok) {
      const int64_t first =
          first_attended_block(static_cast<int64_t>(ok) * block_size_, groups_[g].window, block_size_);
      const int64_t needed = static_cast<int64_t>(ok) - first;
      if (needed == 0 || run[ok - 1] >= needed) break;
    }
    hit = ok;  // a shorter hit needs no more of the groups already checked
  }
  return hit;
}

void PrefixCache::acquire(const PrefixMatch& match, int64_t num_query_tokens) {
  TM_CHECK(match.groups.size() == groups_.size() || match.num_tokens == 0);
  for (size_t g = 0; g < match.groups.size(); ++g) {
    for (BlockId id : match.groups[g].blocks) groups_[g].allocator->retain(id);
  }
  ++stats_.lookups;
  stats_.hit_tokens += match.num_tokens;
  stats_.miss_tokens += std::max<int64_t>(0, num_query_tokens - match.num_tokens);
}

PrefixMatch PrefixCache::match(uint64_t ns, std::span<const int32_t> tokens) {
  PrefixMatch m = lookup(ns, tokens);
  acquire(m, static_cast<int64_t>(tokens.size()));
  return m;
}

void PrefixCache::publish(uint64_t ns, std::span<const int32_t> tokens, std::span<const BlockTable> tables,
                          std::vector<BlockHash>* hashes, PublishQuota quota) {
  TM_CHECK(hashes != nullptr && tables.size() == groups_.size());
  if (!enabled_) return;
  // Group g's block of logical block i, or -1 where its table holds none.
  const auto block_of = [&](size_t g, size_t i) -> BlockId {
    const BlockTable& t = tables[g];
    const int64_t at = static_cast<int64_t>(i) - t.first_block();
    return at >= 0 && at < static_cast<int64_t>(t.blocks().size()) ? t.blocks()[static_cast<size_t>(at)] : -1;
  };
  BlockAllocator& primary = *groups_[0].allocator;
  const size_t full = std::min(tokens.size() / static_cast<size_t>(block_size_), tables[0].blocks().size());
  for (size_t i = hashes->size(); i < full; ++i) {
    const BlockHash* parent = i > 0 ? &(*hashes)[i - 1] : nullptr;
    const std::span<const int32_t> block_tokens = tokens.subspan(i * block_size_, block_size_);
    const BlockHash hash = hash_block(ns, parent, block_tokens);
    const BlockId block = block_of(0, i);
    auto it = index_.find(hash);
    if (it == index_.end() && !primary.is_cached(block)) {
      const bool room =
          quota.max_blocks <= 0 || owner_blocks(quota.owner) < quota.max_blocks || evict_oldest_of(quota.owner);
      // The quota eviction may have dropped the parent (a block this
      // sequence shares only by content): re-check reachability after it.
      if (!room || (parent != nullptr && index_.count(*parent) == 0)) {
        hashes->push_back(hash);
        continue;
      }
      add_entry(ns, hash, parent, block_tokens, block, quota);
      it = index_.find(hash);
    } else if (it == index_.end() || !entry_matches(it->second, ns, parent, block_tokens)) {
      hashes->push_back(hash);
      continue;
    }
    for (size_t g = 1; g < groups_.size(); ++g) attach_block(it->second, g, hash, block_of(g, i));
    hashes->push_back(hash);
  }
}

void PrefixCache::add_entry(uint64_t ns, const BlockHash& hash, const BlockHash* parent,
                            std::span<const int32_t> tokens, BlockId block, const PublishQuota& quota) {
  Entry entry;
  entry.blocks.assign(groups_.size(), -1);
  entry.blocks[0] = block;
  entry.ns = ns;
  entry.has_parent = parent != nullptr;
  if (parent != nullptr) entry.parent = *parent;
  entry.tokens.assign(tokens.begin(), tokens.end());
  entry.owner = quota.owner;
  const BlockHash* parent_content = parent != nullptr ? &index_.at(*parent).content : nullptr;
  entry.content = hash_block(kContentNs, parent_content, tokens);
  ++content_index_[entry.content];
  ++owner_blocks_[entry.owner];
  hash_of_block_[0][static_cast<size_t>(block)] = hash;
  groups_[0].allocator->set_cached(block, true);
  index_.emplace(hash, std::move(entry));
}

bool PrefixCache::evict_oldest_of(uint64_t owner) {
  BlockAllocator& primary = *groups_[0].allocator;
  const std::optional<BlockId> victim = primary.find_evictable(
      [&](BlockId b) { return index_.at(hash_of_block_[0][static_cast<size_t>(b)]).owner == owner; });
  if (!victim) return false;
  const auto it = index_.find(hash_of_block_[0][static_cast<size_t>(*victim)]);
  primary.set_cached(*victim, false);  // evictable -> free
  drop_entry(it);
  ++stats_.quota_evictions;
  return true;
}

int64_t PrefixCache::owner_blocks(uint64_t owner) const {
  const auto it = owner_blocks_.find(owner);
  return it == owner_blocks_.end() ? 0 : it->second;
}

void PrefixCache::attach_block(Entry& entry, size_t group, const BlockHash& hash, BlockId b) {
  BlockAllocator& allocator = *groups_[group].allocator;
  if (b < 0 || entry.blocks[group] >= 0 || allocator.is_cached(b)) return;
  entry.blocks[group] = b;
  hash_of_block_[group][static_cast<size_t>(b)] = hash;
  allocator.set_cached(b, true);
}

void PrefixCache::on_evict(size_t group, BlockId block) {
  const auto it = index_.find(hash_of_block_[group][static_cast<size_t>(block)]);
  TM_CHECK(it != index_.end() && it->second.blocks[group] == block);
  if (group > 0) {  // only that slot goes
    it->second.blocks[group] = -1;
    return;
  }
  drop_entry(it);
}

// Without its primary block the entry is useless: the other groups' blocks
// go back to their holders (or to the free list).
void PrefixCache::drop_entry(Index::iterator it) {
  const Entry& entry = it->second;
  for (size_t g = 1; g < groups_.size(); ++g) {
    if (entry.blocks[g] >= 0) groups_[g].allocator->set_cached(entry.blocks[g], false);
  }
  const auto content = content_index_.find(entry.content);
  if (--content->second == 0) content_index_.erase(content);
  const auto owner = owner_blocks_.find(entry.owner);
  if (--owner->second == 0) owner_blocks_.erase(owner);
  evicted_.insert(it->first);
  index_.erase(it);
  ++stats_.evictions;
}

PrefixMissCounts PrefixCache::classify_misses(uint64_t ns, std::span<const int32_t> tokens,
                                              const PrefixMatch& match) const {
  PrefixMissCounts out{};
  const int64_t n = static_cast<int64_t>(tokens.size());
  if (!enabled_) {
    out[static_cast<size_t>(PrefixMissReason::kDisabled)] = n - match.num_tokens;
    return out;
  }
  // lookup() never covers the last token: its block is beyond reach.
  const int64_t reach_blocks = n > 0 ? (n - 1) / block_size_ : 0;
  const int64_t hit_blocks = match.num_tokens / block_size_;
  out[static_cast<size_t>(PrefixMissReason::kPartialBlock)] =
      n - std::max(reach_blocks * block_size_, match.num_tokens);
  BlockHash hash, content;  // the chains through block i - 1
  for (int64_t i = 0; i < reach_blocks; ++i) {
    const std::span<const int32_t> block_tokens =
        tokens.subspan(static_cast<size_t>(i * block_size_), static_cast<size_t>(block_size_));
    const BlockHash parent = hash, parent_content = content;
    content = hash_block(kContentNs, i > 0 ? &parent_content : nullptr, block_tokens);
    hash =
        i < hit_blocks ? match.hashes[static_cast<size_t>(i)] : hash_block(ns, i > 0 ? &parent : nullptr, block_tokens);
    if (i >= hit_blocks) out[static_cast<size_t>(miss_reason(ns, hash, content))] += block_size_;
  }
  return out;
}

PrefixMissReason PrefixCache::miss_reason(uint64_t ns, const BlockHash& hash, const BlockHash& content) const {
  // Indexed but not hit: a block before it (or another group's block the
  // next token attends) was evicted.
  const auto it = index_.find(hash);
  if ((it != index_.end() && it->second.ns == ns) || evicted_.contains(hash)) return PrefixMissReason::kEvicted;
  if (content_index_.count(content) > 0) return PrefixMissReason::kIsolated;
  return PrefixMissReason::kNoOverlap;
}

void PrefixCache::clear() {
  for (const auto& [hash, entry] : index_) {
    for (size_t g = 0; g < groups_.size(); ++g) {
      if (entry.blocks[g] >= 0) groups_[g].allocator->set_cached(entry.blocks[g], false);
    }
  }
  index_.clear();
  content_index_.clear();
  owner_blocks_.clear();
}

void PrefixCache::set_enabled(bool enabled) {
  if (!enabled) clear();
  enabled_ = enabled;
}

PrefixCacheStats PrefixCache::stats() const {
  PrefixCacheStats s = stats_;
  s.blocks_held = static_cast<int64_t>(index_.size());
  for (const auto& [hash, entry] : index_) {
    for (size_t g = 1; g < groups_.size(); ++g) s.other_group_blocks_held += entry.blocks[g] >= 0 ? 1 : 0;
  }
  return s;
}

}  // namespace tokenmill::kv
