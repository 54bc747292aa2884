#include "util/thread_pool.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <string>

#include "util/env.h"
#include "util/error.h"

#if defined(TOKENMILL_HAVE_OPENMP)
#include <omp.h>
#endif

namespace tokenmill {
namespace {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Polls done() until it holds or spin_us have passed; returns its last value.
// After the first kPausePolls polls it yields between polls, so that a pool
// with more threads than free cores hands the core to the thread it waits
// for instead of spinning out its time slice.
template <class Done>
bool spin_until(const Done& done, int64_t spin_us) {
  constexpr int kPausePolls = 256;
  if (done()) return true;
  if (spin_us <= 0) return false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::microseconds(spin_us);
  for (int i = 1;; ++i) {
    if (i < kPausePolls) {
      cpu_relax();
    } else {
      std::this_thread::yield();
    }
    if (done()) return true;
    if (i % 64 == 0 && std::chrono::steady_clock::now() >= deadline) return done();
  }
}

// The CPUs this process may run on, in order.
std::vector<int> allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (CPU_ISSET(c, &set)) cpus.push_back(c);
    }
  }
  return cpus;
}

// Pins the calling thread to `cpu`; a failure leaves it unpinned (pinning
// is a hint, never a reason to stop).
void pin_calling_thread(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  (void)pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

}  // namespace

bool default_pin() { return env_flag("TOKENMILL_PIN", false); }

int64_t default_spin_us() {
  const char* env = std::getenv("TOKENMILL_SPIN_US");
  if (env == nullptr || *env == '\0') return ThreadPool::kDefaultSpinUs;
  char* end = nullptr;
  const long long v = std::strtoll(env, &end, 10);
  if (*end != '\0' || v < 0 || v > 1000000) {
    throw Error("TOKENMILL_SPIN_US must be a whole number of microseconds in [0, 1000000] (got '" + std::string(env) +
                "')");
  }
  return v;
}

bool ThreadPool::openmp_available() {
#if defined(TOKENMILL_HAVE_OPENMP)
  return true;
#else
  return false;
#endif
}

ThreadPool::Backend default_backend() {
  const char* env = std::getenv("TOKENMILL_POOL");
  const std::string v = env == nullptr ? "" : env;
  if (v.empty() || v == "threads") return ThreadPool::Backend::kThreads;
  if (v == "openmp") {
    if (!ThreadPool::openmp_available()) throw Error("TOKENMILL_POOL=openmp: this build has no OpenMP");
    return ThreadPool::Backend::kOpenMp;
  }
  throw Error("TOKENMILL_POOL must be 'threads' or 'openmp' (got '" + v + "')");
}

ThreadPool::ThreadPool(int num_threads, int64_t spin_us, Backend backend) {
  if (num_threads <= 0) num_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  num_threads_ = num_threads;
  spin_us_ = spin_us < 0 ? default_spin_us() : spin_us;
  spin_budget_us_.store(spin_us_, std::memory_order_relaxed);
  backend_ = backend == Backend::kDefault ? default_backend() : backend;
  if (backend_ == Backend::kOpenMp) {
    if (!openmp_available()) throw Error("thread pool: this build has no OpenMP");
    return;  // OpenMP keeps its own threads
  }
  pin_ = default_pin();
  if (pin_) cpus_ = allowed_cpus();
  if (cpus_.empty()) pin_ = false;
  for (int i = 1; i < num_threads_; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_.store(true, std::memory_order_release);
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::run_share(int index) {
  const int64_t n = job_n_;
  const int64_t begin = n * index / num_threads_;
  const int64_t end = n * (index + 1) / num_threads_;
  if (begin < end) (*job_)(index, begin, end);
}

// The same ranges as run_share, each thread of a parallel region taking its
// own. OpenMP's threads wait between regions as OMP_WAIT_POLICY and
// GOMP_SPINCOUNT say (libgomp: spin, then sleep).
void ThreadPool::parallel_for_openmp(int64_t n, const std::function<void(int, int64_t, int64_t)>& fn) {
#if defined(TOKENMILL_HAVE_OPENMP)
  const int threads = num_threads_;
#pragma omp parallel num_threads(threads)
  {
    // A region may get fewer threads than asked (OMP_DYNAMIC, limits):
    // then some take more than one range.
    for (int index = omp_get_thread_num(); index < threads; index += omp_get_num_threads()) {
      const int64_t begin = n * index / threads;
      const int64_t end = n * (index + 1) / threads;
      if (begin < end) fn(index, begin, end);
    }
  }
#else
  (void)n;
  (void)fn;
#endif
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int, int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  if (num_threads_ == 1 || n == 1) {
    fn(0, 0, n);
    return;
  }
  if (backend_ == Backend::kOpenMp) return parallel_for_openmp(n, fn);
  if (pin_ && !caller_pinned_) {
    pin_calling_thread(cpus_[0]);
    caller_pinned_ = true;
  }
  job_ = &fn;
  job_n_ = n;
  pending_.store(num_threads_ - 1, std::memory_order_relaxed);
  bool wake = false;
  {
    // Under the mutex, so a worker that is about to sleep either sees the
    // new generation or is counted in sleeping_workers_ (no lost wake-up).
    std::lock_guard<std::mutex> lock(mutex_);
    generation_.fetch_add(1, std::memory_order_release);
    wake = sleeping_workers_ > 0;
  }
  if (wake) wake_.notify_all();
  run_share(0);
  const auto all_done = [this] { return pending_.load(std::memory_order_acquire) == 0; };
  const auto wait_start = std::chrono::steady_clock::now();
  if (!spin_until(all_done, spin_budget_us())) {
    std::unique_lock<std::mutex> lock(mutex_);
    caller_sleeping_ = true;
    done_.wait(lock, all_done);
    caller_sleeping_ = false;
  }
  if (spin_us_ > 0) adapt_spin(std::chrono::steady_clock::now() - wait_start);
  job_ = nullptr;
}

void ThreadPool::adapt_spin(std::chrono::steady_clock::duration waited) {
  const int64_t waited_us = std::chrono::duration_cast<std::chrono::microseconds>(waited).count();
  spin_budget_us_.store(next_spin_budget(spin_budget_us(), spin_us_, waited_us), std::memory_order_relaxed);
}

int64_t ThreadPool::next_spin_budget(int64_t budget_us, int64_t spin_us, int64_t waited_us) {
  if (waited_us > spin_us) return budget_us / 2;
  return std::min(spin_us, budget_us + std::max<int64_t>(1, spin_us / 64));
}

void ThreadPool::worker_loop(int index) {
  if (pin_) pin_calling_thread(cpus_[static_cast<size_t>(index) % cpus_.size()]);
  uint64_t seen = 0;
  const auto has_work = [&] {
    return stop_.load(std::memory_order_acquire) || generation_.load(std::memory_order_acquire) != seen;
  };
  for (;;) {
    if (!spin_until(has_work, spin_budget_us())) {
      std::unique_lock<std::mutex> lock(mutex_);
      ++sleeping_workers_;
      wake_.wait(lock, has_work);
      --sleeping_workers_;
    }
    if (stop_.load(std::memory_order_acquire)) return;
    seen = generation_.load(std::memory_order_acquire);
    run_share(index);
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (caller_sleeping_) done_.notify_one();
    }
  }
}

}  // namespace tokenmill
