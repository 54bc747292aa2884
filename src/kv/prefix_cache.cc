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

PrefixCache::PrefixCache(BlockAllocator& allocator, int32_t block_size, bool enabled)
    : allocator_(allocator),
      block_size_(block_size),
      enabled_(enabled),
      hash_of_block_(static_cast<size_t>(allocator.num_blocks())) {
  TM_CHECK(block_size > 0);
  allocator_.set_evict_callback([this](BlockId block) { on_evict(block); });
}

PrefixCache::~PrefixCache() {
  clear();
  allocator_.set_evict_callback(nullptr);
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

PrefixMatch PrefixCache::lookup(uint64_t ns, std::span<const int32_t> tokens) const {
  PrefixMatch match;
  if (!enabled_ || tokens.empty()) return match;
  const size_t max_blocks = (tokens.size() - 1) / static_cast<size_t>(block_size_);
  for (size_t i = 0; i < max_blocks; ++i) {
    const BlockHash* parent = i > 0 ? &match.hashes[i - 1] : nullptr;
    const std::span<const int32_t> block_tokens = tokens.subspan(i * block_size_, block_size_);
    const BlockHash hash = hash_block(ns, parent, block_tokens);
    const auto it = index_.find(hash);
    if (it == index_.end()) break;
    const Entry& entry = it->second;
    const bool same_parent = parent != nullptr ? entry.has_parent && entry.parent == *parent : !entry.has_parent;
    if (entry.ns != ns || !same_parent ||
        !std::equal(block_tokens.begin(), block_tokens.end(), entry.tokens.begin(), entry.tokens.end())) {
      break;  // a hash collision: treat as a miss
    }
    match.blocks.push_back(entry.block);
    match.hashes.push_back(hash);  // invalidates parent; recomputed next iteration
  }
  match.num_tokens = static_cast<int64_t>(match.blocks.size()) * block_size_;
  return match;
}

void PrefixCache::acquire(const PrefixMatch& match, int64_t num_query_tokens) {
  for (BlockId id : match.blocks) allocator_.retain(id);
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
                          std::vector<BlockHash>* hashes) {
  TM_CHECK(hashes != nullptr);
  if (!enabled_) return;
  const size_t full = std::min(tokens.size() / static_cast<size_t>(block_size_), blocks.size());
  for (size_t i = hashes->size(); i < full; ++i) {
    const BlockHash* parent = i > 0 ? &(*hashes)[i - 1] : nullptr;
    const std::span<const int32_t> block_tokens = tokens.subspan(i * block_size_, block_size_);
    const BlockHash hash = hash_block(ns, parent, block_tokens);
    const BlockId block = blocks[i];
    if (!index_.contains(hash) && !allocator_.is_cached(block)) {
      Entry entry;
      entry.block = block;
      entry.ns = ns;
      entry.has_parent = parent != nullptr;
      if (parent != nullptr) entry.parent = *parent;
      entry.tokens.assign(block_tokens.begin(), block_tokens.end());
      index_.emplace(hash, std::move(entry));
      hash_of_block_[block] = hash;
      allocator_.set_cached(block, true);
    }
    hashes->push_back(hash);
  }
}

void PrefixCache::on_evict(BlockId block) {
  const auto it = index_.find(hash_of_block_[block]);
  TM_CHECK(it != index_.end() && it->second.block == block);
  index_.erase(it);
  ++stats_.evictions;
}

void PrefixCache::clear() {
  for (const auto& [hash, entry] : index_) allocator_.set_cached(entry.block, false);
  index_.clear();
}

void PrefixCache::set_enabled(bool enabled) {
  if (!enabled) clear();
  enabled_ = enabled;
}

PrefixCacheStats PrefixCache::stats() const {
  PrefixCacheStats s = stats_;
  s.blocks_held = static_cast<int64_t>(index_.size());
  return s;
}

}  // namespace tokenmill::kv
