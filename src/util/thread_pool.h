// A persistent pool of worker threads for data-parallel loops. The calling
// thread takes part in every loop, so a pool of N threads starts N-1 workers.
//
// Thread-safety: one caller at a time (the engine thread). parallel_for blocks
// until every chunk has run. Cost per call: one wake-up of the workers and
// one join, a few microseconds; keep loops coarse (per matrix, not per row).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace tokenmill {

class ThreadPool {
 public:
  // num_threads <= 0 means one thread per online CPU.
  explicit ThreadPool(int num_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return num_threads_; }

  // Calls fn(thread_index, begin, end) over [0, n) split into num_threads
  // contiguous ranges of near-equal size (empty ranges are skipped).
  void parallel_for(int64_t n, const std::function<void(int, int64_t, int64_t)>& fn);

 private:
  void worker_loop(int index);
  void run_share(int index);

  int num_threads_ = 1;
  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_;
  uint64_t generation_ = 0;
  int pending_ = 0;
  bool stop_ = false;
  int64_t job_n_ = 0;
  const std::function<void(int, int64_t, int64_t)>* job_ = nullptr;
};

}  // namespace tokenmill
