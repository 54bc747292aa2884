// Helpers shared by the prefix-cache tests: token runs, and a sequence that
// computes tokens into fresh blocks and publishes them.
#pragma once

#include <gtest/gtest.h>

#include <numeric>
#include <span>
#include <vector>

#include "kv/block_table.h"
#include "kv/prefix_cache.h"

namespace tokenmill::kv::prefix_test {

inline constexpr int32_t kBlockSize = 4;

inline std::vector<int32_t> iota_tokens(int n, int start = 100) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), start);
  return t;
}

struct Computed {
  BlockTable table;
  std::vector<BlockHash> hashes;
};

inline Computed compute_and_publish(PrefixCache& cache, BlockAllocator& a, uint64_t ns,
                                    const std::vector<int32_t>& tokens, PublishQuota quota = {}) {
  Computed c{BlockTable(a, kBlockSize), {}};
  std::vector<BlockCopy> copies;
  EXPECT_TRUE(c.table.append_slots(static_cast<int64_t>(tokens.size()), &copies));
  cache.publish(ns, tokens, std::span<const BlockTable>(&c.table, 1), &c.hashes, quota);
  return c;
}

}  // namespace tokenmill::kv::prefix_test
