// Counters the HTTP layer keeps beside the engine's metrics: responses by
// endpoint and status code, requests in flight, streams the client left.
// Thread-safe (one mutex; a few updates per request).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>

namespace tokenmill::server {

struct HttpStatsSnapshot {
  std::map<std::pair<std::string, int>, uint64_t> responses;  // (endpoint, status) -> count
  int64_t in_flight = 0;                                      // generation requests being answered now
  uint64_t client_disconnects = 0;                            // streams cancelled because the client went away
  uint64_t auth_failures = 0;
};

class HttpStats {
 public:
  void on_response(const std::string& endpoint, int status);
  void on_disconnect();
  void on_auth_failure();
  void add_in_flight(int64_t delta);
  int64_t in_flight() const;
  HttpStatsSnapshot snapshot() const;

 private:
  mutable std::mutex mutex_;
  HttpStatsSnapshot s_;
};

// The endpoint label for a path: known routes as they are, anything else
// "other" (so a scanner cannot blow up the label set).
std::string endpoint_label(const std::string& path);

}  // namespace tokenmill::server
