// Why prompt tokens were not served by the prefix cache: the `reason` label
// of tokenmill_prefix_cache_miss_tokens_total. Every prompt token of an
// admitted sequence is either a hit or a miss for exactly one of these
// reasons (PrefixCache::classify_misses, Scheduler admission).
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

namespace tokenmill::kv {

enum class PrefixMissReason {
  kNoOverlap,       // no cached block ever held these tokens (as far as the cache remembers)
  kEvicted,         // the block was cached under this namespace and evicted (or one before it was)
  kPartialBlock,    // beyond the lookup's reach: the trailing partial block, or the last token's block
  kIsolated,        // the same tokens are cached, but under another namespace (tenant, adapter)
  kLogprobsBypass,  // the request skips the lookup (prompt log-probabilities)
  kDisabled,        // the prefix cache is off
};
inline constexpr int kNumPrefixMissReasons = 6;

// "no_overlap", "evicted", "partial_block", "isolated", "logprobs_bypass", "disabled".
constexpr std::string_view prefix_miss_reason_name(PrefixMissReason reason) {
  switch (reason) {
    case PrefixMissReason::kNoOverlap: return "no_overlap";
    case PrefixMissReason::kEvicted: return "evicted";
    case PrefixMissReason::kPartialBlock: return "partial_block";
    case PrefixMissReason::kIsolated: return "isolated";
    case PrefixMissReason::kLogprobsBypass: return "logprobs_bypass";
    case PrefixMissReason::kDisabled: return "disabled";
  }
  return "?";
}

// Missed tokens, indexed by PrefixMissReason.
using PrefixMissCounts = std::array<int64_t, kNumPrefixMissReasons>;

}  // namespace tokenmill::kv
