// A persistent pool of worker threads for data-parallel loops. The calling
// thread takes part in every loop, so a pool of N threads starts N-1 workers.
//
// Thread-safety: one caller at a time (the engine thread). parallel_for blocks
// until every chunk has run.
//
// Waiting: between loops the workers, and the caller at the end of a loop,
// spin for a short while (spin_us, default kDefaultSpinUs or the
// TOKENMILL_SPIN_US environment variable) before they sleep on a condition
// variable. A decode step is a few hundred loops a few microseconds apart;
// sleeping and waking through the kernel after every one cost about a tenth
// of a decode step on the 2-core machine (docs/benchmarks.md). The spin is
// bounded so that an idle engine, or a machine with more runnable threads
// than cores, loses at most spin_us of CPU per loop.
//
// The spin adapts (spin_budget_us()): a loop whose end the caller waited
// for longer than spin_us means a thread of the loop was not running (more
// runnable threads than cores: another process, parallel test suites), and
// spinning then only keeps it off a core. So each such wait halves the
// budget every thread spins for, and each shorter one gives 1/64 of
// spin_us back. On a 2-core machine with one busy process beside it, Gemma 3
// decoded at 28.4 tok/s with the fixed spin, 35.1 with the adaptive one and
// 41.0 with none; quiet, fixed and adaptive were within noise of each other
// (docs/benchmarks.md).
//
// Pinning (TOKENMILL_PIN=1; own threads only): thread i runs on the i-th
// CPU (modulo their number) of the process's affinity mask; the caller
// takes the first when it first calls parallel_for. With OpenMP, its own
// OMP_PROC_BIND and OMP_PLACES do the same.
//
// Backend: the pool's own threads, or OpenMP parallel regions (where the
// build has OpenMP), chosen by TOKENMILL_POOL=threads|openmp, for measuring
// one against the other (docs/benchmarks.md). Both split a loop the same
// way, so results do not depend on the backend.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace tokenmill {

class ThreadPool {
 public:
  static constexpr int64_t kDefaultSpinUs = 200;
  enum class Backend { kDefault, kThreads, kOpenMp };

  // num_threads <= 0 means one thread per online CPU. spin_us < 0 means the
  // default (TOKENMILL_SPIN_US if set, else kDefaultSpinUs); 0 never spins.
  // Backend::kDefault means TOKENMILL_POOL (default_backend()). Throws
  // tokenmill::Error for kOpenMp in a build without OpenMP.
  explicit ThreadPool(int num_threads = 0, int64_t spin_us = -1, Backend backend = Backend::kDefault);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return num_threads_; }
  int64_t spin_us() const { return spin_us_; }
  // What the threads spin for now (0..spin_us, see above).
  int64_t spin_budget_us() const { return spin_budget_us_.load(std::memory_order_relaxed); }
  Backend backend() const { return backend_; }
  bool pinned() const { return pin_; }
  // Whether this build can run Backend::kOpenMp.
  static bool openmp_available();
  // The adaptation rule on its own (a pure function, so it is tested
  // without timing): the budget after a loop end the caller waited
  // waited_us for.
  static int64_t next_spin_budget(int64_t budget_us, int64_t spin_us, int64_t waited_us);

  // Calls fn(thread_index, begin, end) over [0, n) split into num_threads
  // contiguous ranges of near-equal size (empty ranges are skipped).
  void parallel_for(int64_t n, const std::function<void(int, int64_t, int64_t)>& fn);

 private:
  void worker_loop(int index);
  void run_share(int index);
  void adapt_spin(std::chrono::steady_clock::duration waited);
  void parallel_for_openmp(int64_t n, const std::function<void(int, int64_t, int64_t)>& fn);

  int num_threads_ = 1;
  int64_t spin_us_ = 0;
  std::atomic<int64_t> spin_budget_us_{0};  // written by the caller only
  Backend backend_ = Backend::kThreads;
  bool pin_ = false;
  std::vector<int> cpus_;       // the affinity mask's CPUs, when pinning
  bool caller_pinned_ = false;  // touched by the caller only
  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
  int sleeping_workers_ = 0;      // guarded by mutex_
  bool caller_sleeping_ = false;  // guarded by mutex_
  int64_t job_n_ = 0;
  const std::function<void(int, int64_t, int64_t)>* job_ = nullptr;
};

// The spin time a pool gets by default: TOKENMILL_SPIN_US when it is set
// (a whole number of microseconds, 0..1000000), else kDefaultSpinUs. Throws
// tokenmill::Error for any other value.
int64_t default_spin_us();

// The backend a pool gets by default: TOKENMILL_POOL = "threads" (or unset
// or empty) or "openmp". Throws tokenmill::Error for any other value, and
// for "openmp" in a build without OpenMP.
ThreadPool::Backend default_backend();

// Whether pools pin their threads: TOKENMILL_PIN = "1" yes, "0" (or unset
// or empty) no. Throws tokenmill::Error for any other value.
bool default_pin();

}  // namespace tokenmill
