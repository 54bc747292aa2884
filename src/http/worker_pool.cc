#include "http/worker_pool.h"

#include <utility>

namespace tokenmill::http {

void WorkerPool::post(std::function<void()> task) {
  std::lock_guard<std::mutex> lock(mu_);
  if (stopping_) return;  // stopping: the connection is closed unanswered
  tasks_.push_back(std::move(task));
  if (idle_ < static_cast<int>(tasks_.size()) && static_cast<int>(threads_.size()) < max_threads_)
    threads_.emplace_back([this] { loop(); });
  cv_.notify_one();
}

void WorkerPool::stop() {
  std::vector<std::thread> threads;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    threads.swap(threads_);
    stopped_threads_ += static_cast<int64_t>(threads.size());
  }
  cv_.notify_all();
  for (std::thread& t : threads)
    if (t.joinable()) t.join();
}

int64_t WorkerPool::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int64_t>(threads_.size()) + stopped_threads_;
}

void WorkerPool::loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    ++idle_;
    cv_.wait(lock, [this] { return stopping_ || !tasks_.empty(); });
    --idle_;
    if (tasks_.empty()) return;  // stopping, nothing left
    std::function<void()> task = std::move(tasks_.front());
    tasks_.pop_front();
    lock.unlock();
    task();
    lock.lock();
  }
}

}  // namespace tokenmill::http
