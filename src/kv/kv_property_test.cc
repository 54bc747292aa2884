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
// The same walk runs with two KV layer groups: a sliding-window group whose
// tables drop the blocks that left the window before each append, with its
// own allocator and fake storage; the checks above then hold for both pools,
// the window table reads back every position the next token attends, and
// holds at most ceil((window - 1 + longest append) / block_size) + 1 blocks.
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
constexpr int32_t kWindowBlocks = 24;
constexpr int kMaxAppend = 14;  // longest single write (a fresh prompt)

struct LiveSeq {
  uint64_t ns = 0;
  std::vector<int32_t> tokens;     // all computed
  std::vector<BlockTable> tables;  // full group, then the window group (two groups only)
  std::vector<BlockHash> hashes;
  BlockTable& table() { return tables[0]; }
  BlockTable& wtable() { return tables[1]; }
  const BlockTable& table() const { return tables[0]; }
  const BlockTable& wtable() const { return tables[1]; }
};

class World {
 public:
  // window == 0: one group.
  World(uint32_t seed, int64_t window)
      : rng_(seed),
        window_(window),
        alloc_(kBlocks),
        walloc_(kWindowBlocks),
        cache_(window > 0 ? std::vector<CacheGroup>{{&alloc_, 0}, {&walloc_, window}}
                          : std::vector<CacheGroup>{{&alloc_, 0}},
               kBs),
        slots_(kBlocks * kBs, -1),
        wslots_(kWindowBlocks * kBs, -1) {}

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
    // Window pool first: reclaiming full-attention blocks un-caches window ones.
    if (window_ > 0) reclaim_all(walloc_, kWindowBlocks);
    reclaim_all(alloc_, kBlocks);
    EXPECT_EQ(cache_.stats().blocks_held, 0);
    EXPECT_EQ(cache_.stats().other_group_blocks_held, 0);
  }

  int64_t hits() const { return cache_.stats().hit_tokens; }
  int64_t copies() const { return num_copies_; }
  int64_t window_drops() const { return num_window_drops_; }

 private:
  int pick(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }

  static void reclaim_all(BlockAllocator& a, int32_t n) {
    EXPECT_EQ(a.num_used(), 0);
    EXPECT_EQ(a.num_free() + a.num_evictable(), n);
    std::vector<BlockId> all;
    for (int i = 0; i < n; ++i) {
      const auto b = a.allocate();
      ASSERT_TRUE(b.has_value()) << "only " << i << " blocks reclaimable";
      all.push_back(*b);
    }
    for (BlockId b : all) a.release(b);
    EXPECT_EQ(a.num_free(), n);
  }

  LiveSeq new_seq() {
    LiveSeq s;
    s.tables.emplace_back(alloc_, kBs);
    if (window_ > 0) s.tables.emplace_back(walloc_, kBs);
    return s;
  }

  // A prompt over a tiny alphabet so that prefixes repeat often.
  void start() {
    LiveSeq s = new_seq();
    s.ns = static_cast<uint64_t>(pick(0, 1));
    const int len = pick(1, kMaxAppend);
    for (int i = 0; i < len; ++i) s.tokens.push_back(pick(0, 1));
    const PrefixMatch m = cache_.lookup(s.ns, s.tokens);
    // Admission as the scheduler does it: all blocks or nothing.
    const std::span<const BlockId> hit = m.blocks();
    const int64_t revived = std::count_if(hit.begin(), hit.end(), [&](BlockId b) { return alloc_.is_evictable(b); });
    const int64_t need = (len + kBs - 1) / kBs - static_cast<int64_t>(hit.size());
    if (need + revived > alloc_.num_available()) return;
    if (window_ > 0) {
      const GroupBlocks& w = m.groups[1];
      const int64_t wrevived =
          std::count_if(w.blocks.begin(), w.blocks.end(), [&](BlockId b) { return walloc_.is_evictable(b); });
      const int64_t wneed = (len + kBs - 1) / kBs - w.first - static_cast<int64_t>(w.blocks.size());
      if (wneed + wrevived > walloc_.num_available()) return;
    } else {
      EXPECT_EQ(m.groups.size(), 1u);
    }
    cache_.acquire(m, len);
    for (size_t g = 0; g < s.tables.size(); ++g) s.tables[g].assign_prefix(m.groups[g].blocks, m.groups[g].first);
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
    std::vector<BlockCopy> cp, wcp;
    const int64_t start = s.table().num_tokens();
    const int64_t n = static_cast<int64_t>(fresh.size());
    if (window_ > 0) {
      // As the scheduler: drop what the next token no longer attends, then
      // append to both groups or neither.
      if (start - window_ + 1 > 0) num_window_drops_ += s.wtable().drop_before(start - window_ + 1);
      if (s.wtable().blocks_needed(n) > walloc_.num_available()) return false;
    }
    if (!s.table().append_slots(n, &cp)) return false;
    if (window_ > 0) {
      EXPECT_TRUE(s.wtable().append_slots(n, &wcp));
    }
    for (const BlockCopy& c : cp) std::copy_n(slots_.begin() + c.src * kBs, kBs, slots_.begin() + c.dst * kBs);
    for (const BlockCopy& c : wcp) std::copy_n(wslots_.begin() + c.src * kBs, kBs, wslots_.begin() + c.dst * kBs);
    num_copies_ += static_cast<int64_t>(cp.size() + wcp.size());
    for (size_t k = 0; k < fresh.size(); ++k) {
      const int64_t pos = start + static_cast<int64_t>(k);
      slots_[slot(s.table(), pos)] = fresh[k];
      if (window_ > 0) wslots_[slot(s.wtable(), pos)] = fresh[k];
      s.tokens.push_back(fresh[k]);
    }
    cache_.publish(s.ns, s.tokens, s.tables, &s.hashes);
    return true;
  }

  static size_t slot(const BlockTable& t, int64_t pos) {
    return static_cast<size_t>(t.blocks()[static_cast<size_t>(pos / kBs - t.first_block())] * kBs + pos % kBs);
  }

  void fork(int i) {
    const LiveSeq& p = seqs_[static_cast<size_t>(i)];
    LiveSeq c;
    c.ns = p.ns;
    c.tokens = p.tokens;
    c.hashes = p.hashes;
    for (const BlockTable& t : p.tables) c.tables.push_back(t.fork());
    seqs_.push_back(std::move(c));
  }

  void finish(int i) { seqs_.erase(seqs_.begin() + i); }

  void check() {
    std::map<BlockId, int> expected, wexpected;
    for (const LiveSeq& s : seqs_) {
      for (BlockId b : s.table().blocks()) ++expected[b];
      ASSERT_EQ(s.table().num_tokens(), static_cast<int64_t>(s.tokens.size()));
      for (size_t pos = 0; pos < s.tokens.size(); ++pos) {
        ASSERT_EQ(slots_[slot(s.table(), static_cast<int64_t>(pos))], s.tokens[pos]) << "position " << pos;
      }
      if (window_ == 0) {
        ASSERT_EQ(s.tables.size(), 1u);
        continue;
      }
      for (BlockId b : s.wtable().blocks()) ++wexpected[b];
      const int64_t size = static_cast<int64_t>(s.tokens.size());
      ASSERT_EQ(s.wtable().num_tokens(), size);
      ASSERT_LE(s.wtable().first_block() * kBs, std::max<int64_t>(0, size - window_ + 1));
      ASSERT_LE(static_cast<int64_t>(s.wtable().blocks().size()), (window_ - 1 + kMaxAppend + kBs - 1) / kBs + 1);
      for (int64_t pos = s.wtable().first_block() * kBs; pos < size; ++pos) {
        ASSERT_EQ(wslots_[slot(s.wtable(), pos)], s.tokens[static_cast<size_t>(pos)]) << "window position " << pos;
      }
    }
    check_pool(alloc_, kBlocks, expected, cache_.stats().blocks_held);
    check_pool(walloc_, kWindowBlocks, wexpected, cache_.stats().other_group_blocks_held);
  }

  static void check_pool(const BlockAllocator& a, int32_t n, const std::map<BlockId, int>& expected, int64_t held) {
    int cached = 0;
    for (BlockId b = 0; b < n; ++b) {
      const auto it = expected.find(b);
      ASSERT_EQ(a.ref_count(b), it == expected.end() ? 0 : it->second) << "block " << b;
      cached += a.is_cached(b) ? 1 : 0;
      ASSERT_EQ(a.is_evictable(b), a.is_cached(b) && a.ref_count(b) == 0);
    }
    ASSERT_EQ(a.num_free() + a.num_evictable() + a.num_used(), n);
    ASSERT_EQ(a.num_used(), static_cast<int32_t>(expected.size()));
    ASSERT_EQ(held, cached);
  }

  std::mt19937 rng_;
  int64_t window_;
  BlockAllocator alloc_;
  BlockAllocator walloc_;  // used only with two groups
  PrefixCache cache_;
  std::vector<int32_t> slots_;   // [kBlocks * kBs] token id written in each slot
  std::vector<int32_t> wslots_;  // [kWindowBlocks * kBs] the same for the window pool
  std::vector<LiveSeq> seqs_;
  int64_t num_copies_ = 0;
  int64_t num_window_drops_ = 0;
};

TEST(KvProperty, RandomOperationsKeepRefcountsContentsAndPoolConsistent) {
  int64_t total_hits = 0, total_copies = 0;
  for (uint32_t seed = 1; seed <= 20; ++seed) {
    SCOPED_TRACE(seed);
    World w(seed, 0);
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

TEST(KvProperty, TwoGroupsWithASlidingWindowStayConsistent) {
  for (int64_t window : {1, 5, 8}) {
    int64_t total_hits = 0, total_copies = 0, total_drops = 0;
    for (uint32_t seed = 1; seed <= 12; ++seed) {
      SCOPED_TRACE(testing::Message() << "window " << window << " seed " << seed);
      World w(seed, window);
      for (int i = 0; i < 600; ++i) {
        w.step();
        if (testing::Test::HasFatalFailure()) return;
      }
      w.finish_all();
      total_hits += w.hits();
      total_copies += w.copies();
      total_drops += w.window_drops();
    }
    EXPECT_GT(total_hits, 0) << window;
    EXPECT_GT(total_copies, 0) << window;
    EXPECT_GT(total_drops, 0) << window;
  }
}

}  // namespace
}  // namespace tokenmill::kv
