// Counters the HTTP layer keeps beside the engine's metrics: responses by
// endpoint and status code, requests in flight, streams the client left.
// Thread-safe (one mutex; a few updates per request).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>

namespace tokenmill::http {

// The front end's connection counters (http_front.h).
struct HttpFrontStats {
  int64_t connections_open = 0;
  int64_t connections_accepted = 0;
  int64_t connections_refused = 0;  // over max_connections or the per-client bound
  int64_t requests_timed_out = 0;   // 408: head or body deadline
  int64_t requests_malformed = 0;   // 4xx/5xx from the parser
  int64_t writes_timed_out = 0;     // output not taken for write_timeout
  int64_t workers = 0;              // threads started so far
};

struct HttpStatsSnapshot {
  std::map<std::pair<std::string, int>, uint64_t> responses;  // (endpoint, status) -> count
  int64_t in_flight = 0;                                      // generation requests being answered now
  uint64_t client_disconnects = 0;                            // streams cancelled because the client went away
  uint64_t auth_failures = 0;
  uint64_t backpressure_pauses = 0;  // streams paused because the client fell behind
  uint64_t stalled_clients = 0;      // streams cancelled because the client stopped reading
  HttpFrontStats front;              // filled in by the server when /metrics is read
};

class HttpStats {
 public:
  void on_response(const std::string& endpoint, int status);
  void on_disconnect();
  void on_auth_failure();
  void on_backpressure_pause();
  void on_stalled_client();
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

}  // namespace tokenmill::http
