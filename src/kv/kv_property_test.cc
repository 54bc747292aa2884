// Property test of allocator + block tables + prefix cache together: random
// sequences of start (with prefix-cache hits), append, fork, finish and
// cancel, with a fake KV storage holding one token id per slot. After every
// operation:
//   * each block's refcount equals its number of appearances in live tables
//     (the cache holds no references of its own);
//   * free + evictable + used == pool; evictable <=> cached and unreferenced;
//     the cache's block count equals the blocks marked cached;
//   * every live table reads back exactly its sequence's tokens through the
//     fake storage (so copy-on-write copies and prefix hits are right).
// At the end, with every table freed, nothing is used and the whole pool can
// be allocated again (cached blocks are all evictable).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <vector>

#include "kv/block_allocator.h"
#include "kv/block_table.h"
#include "kv/prefix_cache.h"

namespace tokenmill::kv {
namespace {

constexpr int32_t kBs = 4;
constexpr int32_t kBlocks = 48;

struct LiveSeq {
  uint64_t ns = 0;
  std::vector<int32_t> tokens;  // all computed
  BlockTable table{kBs};
  std::vector<BlockHash> hashes;
};

class World {
 public:
  explicit World(uint32_t seed) : rng_(seed), alloc_(kBlocks), cache_(alloc_, kBs), slots_(kBlocks * kBs, -1) {}

  void step() {
    const int op = pick(0, 9);
    if (seqs_.empty() || op <= 1) {
      start();
    } else if (op <= 6) {
      append(pick(0, static_cast<int>(seqs_.size()) - 1), pick(1, 7));
    } else if (op == 7) {
      fork(pick(0, static_cast<int>(seqs_.size()) - 1));
    } else {
      finish(pick(0, static_cast<int>(seqs_.size()) - 1));
    }
    check();
  }

  void finish_all() {
    while (!seqs_.empty()) finish(0);
    check();
    EXPECT_EQ(alloc_.num_used(), 0);
    EXPECT_EQ(alloc_.num_free() + alloc_.num_evictable(), kBlocks);
    std::vector<BlockId> all;
    for (int i = 0; i < kBlocks; ++i) {
      const auto b = alloc_.allocate();
      ASSERT_TRUE(b.has_value()) << "only " << i << " blocks reclaimable";
      all.push_back(*b);
    }
    EXPECT_EQ(cache_.stats().blocks_held, 0);
    for (BlockId b : all) alloc_.release(b);
    EXPECT_EQ(alloc_.num_free(), kBlocks);
  }

  int64_t hits() const { return cache_.stats().hit_tokens; }
  int64_t copies() const { return num_copies_; }

 private:
  int pick(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }

  // A prompt over a tiny alphabet so that prefixes repeat often.
  void start() {
    LiveSeq s;
    s.ns = static_cast<uint64_t>(pick(0, 1));
    const int len = pick(1, 14);
    for (int i = 0; i < len; ++i) s.tokens.push_back(pick(0, 1));
    const PrefixMatch m = cache_.lookup(s.ns, s.tokens);
    // Admission as the scheduler does it: all blocks or nothing.
    const int64_t revived = std::count_if(m.blocks.begin(), m.blocks.end(),
                                          [&](BlockId b) { return alloc_.is_evictable(b); });
    const int64_t need = (len + kBs - 1) / kBs - static_cast<int64_t>(m.blocks.size());
    if (need + revived > alloc_.num_available()) return;
    cache_.acquire(m, len);
    s.table.assign_prefix(m.blocks);
    s.hashes = m.hashes;
    std::vector<int32_t> rest(s.tokens.begin() + m.num_tokens, s.tokens.end());
    s.tokens.resize(static_cast<size_t>(m.num_tokens));
    seqs_.push_back(std::move(s));
    ASSERT_TRUE(write(seqs_.back(), rest));
  }

  void append(int i, int n) {
    std::vector<int32_t> fresh;
    for (int k = 0; k < n; ++k) fresh.push_back(pick(0, 2));
    write(seqs_[static_cast<size_t>(i)], fresh);  // may fail when the pool is dry: no change
  }

  // Reserves slots (copy-on-write included), applies copies, writes tokens,
  // publishes full blocks. Returns false when the pool is dry.
  bool write(LiveSeq& s, const std::vector<int32_t>& fresh) {
    std::vector<BlockCopy> cp;
    const int64_t start = s.table.num_tokens();
    if (!s.table.append_slots(static_cast<int64_t>(fresh.size()), alloc_, &cp)) return false;
    for (const BlockCopy& c : cp) {
      std::copy_n(slots_.begin() + c.src * kBs, kBs, slots_.begin() + c.dst * kBs);
    }
    num_copies_ += static_cast<int64_t>(cp.size());
    for (size_t k = 0; k < fresh.size(); ++k) {
      const int64_t pos = start + static_cast<int64_t>(k);
      slots_[static_cast<size_t>(s.table.blocks()[pos / kBs] * kBs + pos % kBs)] = fresh[k];
      s.tokens.push_back(fresh[k]);
    }
    cache_.publish(s.ns, s.tokens, s.table.blocks(), &s.hashes);
    return true;
  }

  void fork(int i) {
    const LiveSeq& p = seqs_[static_cast<size_t>(i)];
    LiveSeq c;
    c.ns = p.ns;
    c.tokens = p.tokens;
    c.hashes = p.hashes;
    c.table = p.table.fork(alloc_);
    seqs_.push_back(std::move(c));
  }

  void finish(int i) {
    seqs_[static_cast<size_t>(i)].table.free(alloc_);
    seqs_.erase(seqs_.begin() + i);
  }

  void check() {
    std::map<BlockId, int> expected;
    for (const LiveSeq& s : seqs_) {
      for (BlockId b : s.table.blocks()) ++expected[b];
      ASSERT_EQ(s.table.num_tokens(), static_cast<int64_t>(s.tokens.size()));
      for (size_t pos = 0; pos < s.tokens.size(); ++pos) {
        const BlockId b = s.table.blocks()[pos / kBs];
        ASSERT_EQ(slots_[static_cast<size_t>(b * kBs) + pos % kBs], s.tokens[pos]) << "position " << pos;
      }
    }
    int cached = 0;
    for (BlockId b = 0; b < kBlocks; ++b) {
      const auto it = expected.find(b);
      ASSERT_EQ(alloc_.ref_count(b), it == expected.end() ? 0 : it->second) << "block " << b;
      cached += alloc_.is_cached(b) ? 1 : 0;
      ASSERT_EQ(alloc_.is_evictable(b), alloc_.is_cached(b) && alloc_.ref_count(b) == 0);
    }
    ASSERT_EQ(alloc_.num_free() + alloc_.num_evictable() + alloc_.num_used(), kBlocks);
    ASSERT_EQ(alloc_.num_used(), static_cast<int32_t>(expected.size()));
    ASSERT_EQ(cache_.stats().blocks_held, cached);
  }

  std::mt19937 rng_;
  BlockAllocator alloc_;
  PrefixCache cache_;
  std::vector<int32_t> slots_;  // [kBlocks * kBs] token id written in each slot
  std::vector<LiveSeq> seqs_;
  int64_t num_copies_ = 0;
};

TEST(KvProperty, RandomOperationsKeepRefcountsContentsAndPoolConsistent) {
  int64_t total_hits = 0, total_copies = 0;
  for (uint32_t seed = 1; seed <= 20; ++seed) {
    SCOPED_TRACE(seed);
    World w(seed);
    for (int i = 0; i < 600; ++i) {
      w.step();
      if (testing::Test::HasFatalFailure()) return;
    }
    w.finish_all();
    total_hits += w.hits();
    total_copies += w.copies();
  }
  // The walk must actually exercise prefix hits and copy-on-write.
  EXPECT_GT(total_hits, 0);
  EXPECT_GT(total_copies, 0);
}

}  // namespace
}  // namespace tokenmill::kv
