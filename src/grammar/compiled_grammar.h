// A grammar ready for constrained decoding on one vocabulary: the Grammar,
// the vocabulary tables, and a cache of token masks per parse context that
// fills in as requests use it (matcher.h explains the key).
//
// Thread-safety: immutable except the mask cache, which has its own mutex;
// shared by every request that sent the same constraint.
#pragma once
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "grammar/constraint.h"
#include "grammar/grammar.h"
#include "grammar/token_vocab.h"

namespace tokenmill::grammar {

// Tokens a parse context decides on its own, and those it cannot decide
// because their bytes run past the end of the context.
struct ContextMask {
  std::vector<uint32_t> accepted;  // [mask_words] tokens valid in any enclosing context
  std::vector<int32_t> uncertain;  // tokens to check against the full parse state
};

class CompiledGrammar {
 public:
  CompiledGrammar(Grammar grammar, std::shared_ptr<const TokenVocab> vocab, ConstraintSpec source);

  const Grammar& grammar() const { return grammar_; }
  const TokenVocab& vocab() const { return *vocab_; }
  const ConstraintSpec& source() const { return source_; }

  // The cached mask for a context key, computing it with `compute` on a miss.
  // The returned reference stays valid for the grammar's lifetime (entries
  // are never evicted; their number is bounded by the contexts the grammar
  // has, and max_cached_contexts caps it, past which compute() runs uncached
  // into `scratch`).
  template <typename Compute>
  const ContextMask& context_mask(const std::vector<uint32_t>& key, ContextMask& scratch, Compute&& compute) const;

  struct CacheStats {
    int64_t hits = 0;
    int64_t misses = 0;
    int64_t entries = 0;
  };
  CacheStats cache_stats() const;

  static constexpr size_t kMaxCachedContexts = 4096;

 private:
  struct KeyHash {
    size_t operator()(const std::vector<uint32_t>& key) const;
  };
  Grammar grammar_;
  std::shared_ptr<const TokenVocab> vocab_;
  ConstraintSpec source_;
  mutable std::mutex mu_;
  mutable std::unordered_map<std::vector<uint32_t>, std::unique_ptr<ContextMask>, KeyHash> masks_;
  mutable CacheStats stats_;
};

template <typename Compute>
const ContextMask& CompiledGrammar::context_mask(const std::vector<uint32_t>& key, ContextMask& scratch,
                                                 Compute&& compute) const {
  {
    std::lock_guard lock(mu_);
    auto it = masks_.find(key);
    if (it != masks_.end()) {
      ++stats_.hits;
      return *it->second;
    }
    ++stats_.misses;
  }
  // Computed outside the lock: one engine thread uses the cache, and a
  // second computation of the same key is wasted work, not a race.
  auto mask = std::make_unique<ContextMask>();
  compute(*mask);
  std::lock_guard lock(mu_);
  if (masks_.size() >= kMaxCachedContexts) {
    scratch = std::move(*mask);
    return scratch;
  }
  auto [it, inserted] = masks_.emplace(key, std::move(mask));
  stats_.entries = static_cast<int64_t>(masks_.size());
  return *it->second;
}

}  // namespace tokenmill::grammar
