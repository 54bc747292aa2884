#include "kv/prefix_cache.h"

#include <algorithm>
#include <cstring>

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

void append_bytes(std::vector<uint8_t>& out, const void* data, size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
  out.insert(out.end(), p, p + n);
}

}  // namespace

uint64_t namespace_id(const CacheNamespace& ns) {
  std::vector<uint8_t> bytes;
  for (const std::string* field : {&ns.model, &ns.tokenizer, &ns.adapter, &ns.rope, &ns.attention, &ns.kv_dtype,
                                   &ns.isolation}) {
    const uint64_t size = field->size();
    append_bytes(bytes, &size, sizeof(size));
    append_bytes(bytes, field->data(), field->size());
  }
  return XXH3_64bits(bytes.data(), bytes.size());
}

PrefixCache::PrefixCache(BlockAllocator& allocator, int32_t block_size, bool enabled, WindowGroup window)
    : allocator_(allocator),
      window_(window),
      block_size_(block_size),
      enabled_(enabled),
      hash_of_block_(static_cast<size_t>(allocator.num_blocks())) {
  TM_CHECK(block_size > 0);
  allocator_.set_evict_callback([this](BlockId block) { on_evict(block); });
  if (window_.allocator != nullptr) {
    TM_CHECK(window_.window > 0);
    hash_of_window_block_.resize(static_cast<size_t>(window_.allocator->num_blocks()));
    window_.allocator->set_evict_callback([this](BlockId block) { on_window_evict(block); });
  }
}

PrefixCache::~PrefixCache() {
  clear();
  allocator_.set_evict_callback(nullptr);
  if (window_.allocator != nullptr) window_.allocator->set_evict_callback(nullptr);
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
  return entry.ns == ns && same_parent && std::equal(tokens.begin(), tokens.end(), entry.tokens.begin(), entry.tokens.end());
}

PrefixMatch PrefixCache::lookup(uint64_t ns, std::span<const int32_t> tokens) const {
  PrefixMatch match;
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
    match.blocks.push_back(entry.block);
    match.hashes.push_back(hash);  // invalidates parent; recomputed next iteration
    entries.push_back(&entry);
  }
  if (window_.allocator != nullptr) {
    const size_t hit = window_limited_hit(entries);
    match.blocks.resize(hit);
    match.hashes.resize(hit);
    const int64_t boundary = static_cast<int64_t>(hit) * block_size_;
    match.window_first = std::max<int64_t>(0, boundary - window_.window + 1) / block_size_;
    for (size_t i = static_cast<size_t>(match.window_first); i < hit; ++i) {
      match.window_blocks.push_back(entries[i]->window_block);
    }
  }
  match.num_tokens = static_cast<int64_t>(match.blocks.size()) * block_size_;
  return match;
}

size_t PrefixCache::window_limited_hit(const std::vector<const Entry*>& entries) const {
  // run = how many consecutive entries ending at i have their window block.
  std::vector<int64_t> run(entries.size());
  for (size_t i = 0; i < entries.size(); ++i) {
    run[i] = entries[i]->window_block < 0 ? 0 : (i > 0 ? run[i - 1] : 0) + 1;
  }
  for (size_t hit = entries.size(); hit > 0; --hit) {
    const int64_t boundary = static_cast<int64_t>(hit) * block_size_;
    const int64_t first = std::max<int64_t>(0, boundary - window_.window + 1) / block_size_;
    const int64_t needed = static_cast<int64_t>(hit) - first;
    if (needed == 0 || run[hit - 1] >= needed) return hit;
  }
  return 0;
}

void PrefixCache::acquire(const PrefixMatch& match, int64_t num_query_tokens) {
  for (BlockId id : match.blocks) allocator_.retain(id);
  if (!match.window_blocks.empty()) TM_CHECK(window_.allocator != nullptr);
  for (BlockId id : match.window_blocks) window_.allocator->retain(id);
  ++stats_.lookups;
  stats_.hit_tokens += match.num_tokens;
  stats_.miss_tokens += std::max<int64_t>(0, num_query_tokens - match.num_tokens);
}

PrefixMatch PrefixCache::match(uint64_t ns, std::span<const int32_t> tokens) {
  PrefixMatch m = lookup(ns, tokens);
  acquire(m, static_cast<int64_t>(tokens.size()));
  return m;
}

void PrefixCache::publish(uint64_t ns, std::span<const int32_t> tokens, std::span<const BlockId> blocks,
                          std::vector<BlockHash>* hashes, std::span<const BlockId> window_blocks,
                          int64_t window_first) {
  TM_CHECK(hashes != nullptr);
  TM_CHECK(window_blocks.empty() || window_.allocator != nullptr);
  if (!enabled_) return;
  const auto window_block_of = [&](size_t i) -> BlockId {
    const int64_t w = static_cast<int64_t>(i) - window_first;
    return w >= 0 && w < static_cast<int64_t>(window_blocks.size()) ? window_blocks[static_cast<size_t>(w)] : -1;
  };
  const size_t full = std::min(tokens.size() / static_cast<size_t>(block_size_), blocks.size());
  for (size_t i = hashes->size(); i < full; ++i) {
    const BlockHash* parent = i > 0 ? &(*hashes)[i - 1] : nullptr;
    const std::span<const int32_t> block_tokens = tokens.subspan(i * block_size_, block_size_);
    const BlockHash hash = hash_block(ns, parent, block_tokens);
    const BlockId block = blocks[i];
    const auto it = index_.find(hash);
    if (it == index_.end() && !allocator_.is_cached(block)) {
      Entry entry;
      entry.block = block;
      entry.ns = ns;
      entry.has_parent = parent != nullptr;
      if (parent != nullptr) entry.parent = *parent;
      entry.tokens.assign(block_tokens.begin(), block_tokens.end());
      hash_of_block_[block] = hash;
      allocator_.set_cached(block, true);
      attach_window_block(index_.emplace(hash, std::move(entry)).first->second, hash, window_block_of(i));
    } else if (it != index_.end() && entry_matches(it->second, ns, parent, block_tokens)) {
      attach_window_block(it->second, hash, window_block_of(i));
    }
    hashes->push_back(hash);
  }
}

void PrefixCache::attach_window_block(Entry& entry, const BlockHash& hash, BlockId wb) {
  if (wb < 0 || entry.window_block >= 0 || window_.allocator->is_cached(wb)) return;
  entry.window_block = wb;
  hash_of_window_block_[static_cast<size_t>(wb)] = hash;
  window_.allocator->set_cached(wb, true);
}

void PrefixCache::on_evict(BlockId block) {
  const auto it = index_.find(hash_of_block_[block]);
  TM_CHECK(it != index_.end() && it->second.block == block);
  // Without its full-attention half the entry is useless: its window block
  // goes back to its holders (or to the free list).
  if (it->second.window_block >= 0) window_.allocator->set_cached(it->second.window_block, false);
  index_.erase(it);
  ++stats_.evictions;
}

void PrefixCache::on_window_evict(BlockId block) {
  const auto it = index_.find(hash_of_window_block_[static_cast<size_t>(block)]);
  TM_CHECK(it != index_.end() && it->second.window_block == block);
  it->second.window_block = -1;
}

void PrefixCache::clear() {
  for (const auto& [hash, entry] : index_) {
    allocator_.set_cached(entry.block, false);
    if (entry.window_block >= 0) window_.allocator->set_cached(entry.window_block, false);
  }
  index_.clear();
}

void PrefixCache::set_enabled(bool enabled) {
  if (!enabled) clear();
  enabled_ = enabled;
}

PrefixCacheStats PrefixCache::stats() const {
  PrefixCacheStats s = stats_;
  s.blocks_held = static_cast<int64_t>(index_.size());
  for (const auto& [hash, entry] : index_) s.window_blocks_held += entry.window_block >= 0 ? 1 : 0;
  return s;
}

}  // namespace tokenmill::kv
