// A request's output stream read on a thread of its own, with the time each
// token arrived: the benchmarks time tokens as a client would see them.
//
// Thread-safety: count() and times() may be called while the reader runs;
// wait_final() joins it. The destructor joins too, so the request must end
// (finish or be cancelled through handle()) before a TokenClock goes away.
#pragma once

#include <cstddef>
#include <mutex>
#include <thread>
#include <vector>

#include "engine/engine.h"
#include "util/clock.h"

namespace tokenmill::cli {

class TokenClock {
 public:
  explicit TokenClock(engine::RequestHandle h);
  ~TokenClock();
  TokenClock(const TokenClock&) = delete;
  TokenClock& operator=(const TokenClock&) = delete;

  // Tokens so far, and when each arrived (a copy, taken under the lock).
  size_t count() const;
  std::vector<SteadyClock::time_point> times() const;
  engine::RequestHandle& handle() { return handle_; }
  // Joins the reader; fails unless the request ran to its length or a stop.
  engine::FinalEvent wait_final();

 private:
  void read();

  engine::RequestHandle handle_;
  mutable std::mutex mutex_;
  std::vector<SteadyClock::time_point> times_;
  engine::FinalEvent final_;
  std::thread thread_;  // last: starts reading once the members above exist
};

}  // namespace tokenmill::cli
