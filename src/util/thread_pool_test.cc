#include "util/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <vector>

namespace tokenmill {
namespace {

TEST(ThreadPool, CoversEveryIndexExactlyOnce) {
  for (int threads : {1, 2, 3, 8}) {
    ThreadPool pool(threads);
    for (int64_t n : {0, 1, 2, 7, 1000}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      pool.parallel_for(n, [&](int, int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)]++;
      });
      for (auto& h : hits) ASSERT_EQ(h.load(), 1) << "threads=" << threads << " n=" << n;
    }
  }
}

TEST(ThreadPool, ManyConsecutiveLoops) {
  ThreadPool pool(2);
  std::atomic<int64_t> sum{0};
  for (int rep = 0; rep < 2000; ++rep) {
    pool.parallel_for(10, [&](int, int64_t b, int64_t e) { sum += e - b; });
  }
  EXPECT_EQ(sum.load(), 20000);
}

}  // namespace
}  // namespace tokenmill
