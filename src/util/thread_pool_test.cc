#include "util/thread_pool.h"

#include <gtest/gtest.h>

#include <sched.h>
#include <stdlib.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "util/error.h"

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

// Both ways of waiting: never spinning (every hand-over goes through the
// condition variables) and spinning longer than any loop takes.
TEST(ThreadPool, SleepingAndSpinningPoolsRunEveryLoop) {
  for (int64_t spin_us : {0, 1000000}) {
    ThreadPool pool(3, spin_us);
    EXPECT_EQ(pool.spin_us(), spin_us);
    std::atomic<int64_t> sum{0};
    for (int rep = 0; rep < 3000; ++rep) {
      pool.parallel_for(3, [&](int, int64_t b, int64_t e) { sum += e - b; });
    }
    EXPECT_EQ(sum.load(), 9000) << "spin_us=" << spin_us;
  }
}

// Workers that outlast the spin make the caller sleep, and workers that
// find no work within the spin go to sleep; both must still be woken.
TEST(ThreadPool, WakesAfterTheSpinRunsOut) {
  ThreadPool pool(2, 50);
  std::atomic<int> runs{0};
  for (int rep = 0; rep < 5; ++rep) {
    pool.parallel_for(2, [&](int index, int64_t, int64_t) {
      if (index == 1) std::this_thread::sleep_for(std::chrono::milliseconds(2));
      runs++;
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(2));  // workers fall asleep
  }
  EXPECT_EQ(runs.load(), 10);
}

// The rule: a wait longer than spin_us halves the budget, a shorter one
// gives 1/64 of spin_us back (at least 1 us), never past spin_us.
TEST(ThreadPool, SpinBudgetRule) {
  EXPECT_EQ(ThreadPool::next_spin_budget(200, 200, 201), 100);
  EXPECT_EQ(ThreadPool::next_spin_budget(1, 200, 5000), 0);
  EXPECT_EQ(ThreadPool::next_spin_budget(0, 200, 201), 0);
  EXPECT_EQ(ThreadPool::next_spin_budget(0, 200, 200), 3);  // 200/64
  EXPECT_EQ(ThreadPool::next_spin_budget(198, 200, 10), 200);
  EXPECT_EQ(ThreadPool::next_spin_budget(200, 200, 0), 200);
  EXPECT_EQ(ThreadPool::next_spin_budget(0, 50, 10), 1);  // at least 1 us
  // From nothing back to the full budget in spin_us/64 quick loops.
  int64_t budget = 0;
  int loops = 0;
  while (budget < 200) {
    budget = ThreadPool::next_spin_budget(budget, 200, 0);
    ++loops;
  }
  EXPECT_EQ(loops, 67);
}

// In a pool: a loop whose end the caller waits for longer than spin_us
// halves the spin (a worker that sleeps stands for one that is not
// running). Only the halving is checked here, since a sleep is always long
// enough; whether a quick loop ends within spin_us depends on the machine
// (under emulation or load it may not), which is why the give-back is
// checked on the rule above.
TEST(ThreadPool, SpinHalvesOnLongWaits) {
  ThreadPool pool(2, 200);
  EXPECT_EQ(pool.spin_budget_us(), 200);
  const auto slow_worker = [](int index, int64_t, int64_t) {
    if (index == 1) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  };
  pool.parallel_for(2, slow_worker);
  EXPECT_EQ(pool.spin_budget_us(), 100);
  for (int i = 0; i < 10; ++i) pool.parallel_for(2, slow_worker);
  EXPECT_EQ(pool.spin_budget_us(), 0);
  ThreadPool never_spins(2, 0);
  never_spins.parallel_for(2, slow_worker);
  EXPECT_EQ(never_spins.spin_budget_us(), 0);
}

TEST(ThreadPool, SpinTimeFromTheEnvironment) {
  ::setenv("TOKENMILL_SPIN_US", "7", 1);
  EXPECT_EQ(default_spin_us(), 7);
  EXPECT_EQ(ThreadPool(2).spin_us(), 7);
  for (const char* bad : {"-1", "abc", "5us", "2000000"}) {
    ::setenv("TOKENMILL_SPIN_US", bad, 1);
    EXPECT_THROW(default_spin_us(), Error) << bad;
  }
  ::unsetenv("TOKENMILL_SPIN_US");
  EXPECT_EQ(default_spin_us(), ThreadPool::kDefaultSpinUs);
}

// Both backends hand out the same ranges: the same (thread index, begin,
// end) triples for every loop size, so results cannot depend on the backend.
TEST(ThreadPool, OpenMpBackendGivesTheSameRanges) {
  if (!ThreadPool::openmp_available()) GTEST_SKIP() << "this build has no OpenMP";
  for (int threads : {2, 3}) {
    ThreadPool own(threads, -1, ThreadPool::Backend::kThreads);
    ThreadPool omp(threads, -1, ThreadPool::Backend::kOpenMp);
    EXPECT_EQ(omp.backend(), ThreadPool::Backend::kOpenMp);
    for (int64_t n : {2, 7, 1000}) {
      const auto ranges = [&](ThreadPool& pool) {
        std::vector<int64_t> r(static_cast<size_t>(3 * threads), -1);
        pool.parallel_for(n, [&](int index, int64_t b, int64_t e) {
          r[static_cast<size_t>(3 * index)] = index;
          r[static_cast<size_t>(3 * index + 1)] = b;
          r[static_cast<size_t>(3 * index + 2)] = e;
        });
        return r;
      };
      EXPECT_EQ(ranges(own), ranges(omp)) << "threads=" << threads << " n=" << n;
    }
    std::atomic<int64_t> sum{0};
    for (int rep = 0; rep < 500; ++rep) omp.parallel_for(10, [&](int, int64_t b, int64_t e) { sum += e - b; });
    EXPECT_EQ(sum.load(), 5000);
  }
}

TEST(ThreadPool, BackendFromTheEnvironment) {
  ::setenv("TOKENMILL_POOL", "threads", 1);
  EXPECT_EQ(default_backend(), ThreadPool::Backend::kThreads);
  ::setenv("TOKENMILL_POOL", "openmp", 1);
  if (ThreadPool::openmp_available()) {
    EXPECT_EQ(default_backend(), ThreadPool::Backend::kOpenMp);
    EXPECT_EQ(ThreadPool(2).backend(), ThreadPool::Backend::kOpenMp);
  } else {
    EXPECT_THROW(default_backend(), Error);
  }
  ::setenv("TOKENMILL_POOL", "tbb", 1);
  EXPECT_THROW(default_backend(), Error);
  EXPECT_THROW(ThreadPool(2), Error);
  ::unsetenv("TOKENMILL_POOL");
  EXPECT_EQ(ThreadPool(2).backend(), ThreadPool::Backend::kThreads);
}

// With TOKENMILL_PIN=1, thread i runs on the i-th allowed CPU (modulo
// their number), the caller on the first.
TEST(ThreadPool, PinsThreadsToTheAllowedCpus) {
  cpu_set_t before;
  ASSERT_EQ(sched_getaffinity(0, sizeof(before), &before), 0);
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &before)) cpus.push_back(c);
  }
  ::setenv("TOKENMILL_PIN", "1", 1);
  {
    ThreadPool pool(3, -1, ThreadPool::Backend::kThreads);
    EXPECT_TRUE(pool.pinned());
    std::vector<int> ran_on(3, -1);
    pool.parallel_for(3, [&](int index, int64_t, int64_t) { ran_on[static_cast<size_t>(index)] = sched_getcpu(); });
    for (int i = 0; i < 3; ++i)
      EXPECT_EQ(ran_on[static_cast<size_t>(i)], cpus[static_cast<size_t>(i) % cpus.size()]) << i;
  }
  ASSERT_EQ(sched_setaffinity(0, sizeof(before), &before), 0);  // the caller was pinned: undo it
  for (const char* bad : {"yes", "2"}) {
    ::setenv("TOKENMILL_PIN", bad, 1);
    EXPECT_THROW(default_pin(), Error) << bad;
  }
  ::setenv("TOKENMILL_PIN", "0", 1);
  EXPECT_FALSE(ThreadPool(2).pinned());
  ::unsetenv("TOKENMILL_PIN");
  EXPECT_FALSE(default_pin());
}

}  // namespace
}  // namespace tokenmill
