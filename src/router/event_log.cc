#include "router/event_log.h"

#include <cstdio>
#include <mutex>

namespace tokenmill::router {

void log_event(const nlohmann::json& event) {
  static std::mutex mutex;
  // Replacement keeps a replica's odd bytes from throwing in a log line.
  const std::string line = event.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  std::lock_guard<std::mutex> lock(mutex);
  std::fputs(line.c_str(), stderr);
  std::fflush(stderr);
}

}  // namespace tokenmill::router
