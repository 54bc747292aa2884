// Polls every replica's GET /health and GET /metrics on a thread of its own
// (a slow replica delays only its own checks), marks it up or down, and
// keeps its queue depth (tokenmill_requests_waiting) for the load formula.
//
// Up: /health answers 200, or 503 with status "overloaded" (alive, its
// queue is full; the load formula steers around it). Down: anything else,
// including "loading" and "stopping" and no answer within the timeout. A
// replica that is down stays polled and comes back once healthy.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "router/balancer.h"

namespace tokenmill::router {

struct HealthOptions {
  std::chrono::milliseconds poll_interval{500};
  std::chrono::milliseconds timeout{2000};  // connect and read, per check
};

// The verdict on one /health answer (see above). status < 0: no answer.
bool health_says_up(int status, std::string_view body);

// The value of the unlabelled sample `name` in Prometheus text; nullopt
// when absent or malformed.
std::optional<double> metric_value(std::string_view text, std::string_view name);

class HealthMonitor {
 public:
  // `balancer` must outlive the monitor.
  HealthMonitor(Balancer& balancer, HealthOptions options);
  ~HealthMonitor();  // stops and joins
  HealthMonitor(const HealthMonitor&) = delete;
  HealthMonitor& operator=(const HealthMonitor&) = delete;

  // Checks every replica once, in parallel, and returns when all answered
  // or timed out (start-up: the first request should find replicas up).
  void poll_all_once();
  void start();
  void stop();

 private:
  void poll(size_t i);
  void loop(size_t i);

  Balancer& balancer_;
  HealthOptions options_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;  // guarded by mutex_
  std::vector<std::thread> threads_;
};

}  // namespace tokenmill::router
