// The HTTP front's handler threads (http_front.h): a pool that grows with
// the work it is given. Internal to the front.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace tokenmill::http {

// Threads started as work arrives and no thread is idle, up to a bound;
// beyond it tasks wait in order. Thread-safe.
class WorkerPool {
 public:
  explicit WorkerPool(int max_threads) : max_threads_(max_threads) {}
  ~WorkerPool() { stop(); }
  // Runs `task` on a pool thread; dropped once stop() has begun.
  void post(std::function<void()> task);
  // Runs the queued tasks to their end and joins every thread.
  void stop();
  // Threads started so far, joined ones included.
  int64_t size() const;

 private:
  void loop();

  const int max_threads_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  std::vector<std::thread> threads_;
  int idle_ = 0;
  bool stopping_ = false;
  int64_t stopped_threads_ = 0;
};

}  // namespace tokenmill::http
