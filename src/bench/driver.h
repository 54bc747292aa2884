// The HTTP load driver: sends planned requests to an OpenAI-compatible
// server with `concurrency` client threads (one blocking connection each;
// threads sleep in recv, so 64-256 streams cost little CPU and their
// timestamps are taken the moment bytes arrive) and records every request.
//
// Open loop: a request with a schedule is sent at its time, or as soon as a
// client is free (the delay shows as sched_delay). Closed loop: each client
// sends its next request when the previous one ends (+ think time).
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "bench/plan.h"
#include "bench/record.h"
#include "bench/traffic_spec.h"
#include "util/clock.h"

namespace httplib {
class Client;
}  // namespace httplib

namespace tokenmill::bench {

// "http://host:port[/prefix]" split for the HTTP client; a trailing "/v1"
// is dropped (paths are "/v1/completions" etc.). Throws Error.
struct HttpTarget {
  std::string origin;  // scheme://host:port
  std::string prefix;  // "" or "/something"
};
HttpTarget parse_target_url(const std::string& url);

// The JSON body of one request (completions or chat, per the spec).
std::string request_body(const TrafficSpec& spec, const PlannedRequest& request);

// The client's own cost while it ran a cell.
struct DriverStats {
  double wall_s = 0;
  double cpu_s = 0;  // this process's CPU time (all threads)
  int64_t threads = 0;
  int64_t chunks = 0;      // response pieces handled
  double handling_ms = 0;  // summed time inside the receive callback
  double handling_max_ms = 0;
};

struct CellRun {
  std::vector<RequestRecord> records;  // in plan order
  double window_start_ms = 0;          // first send
  double window_end_ms = 0;            // last end
  DriverStats driver;
};

class Driver {
 public:
  // `t0`: the run's time origin for every recorded time.
  Driver(const TrafficSpec& spec, const std::string& url, SteadyClock::time_point t0);

  // Blocks until every request has ended or timed out. `duration_s` > 0:
  // requests not started by then are marked not_sent.
  CellRun run(const std::vector<PlannedRequest>& requests, int64_t concurrency, double duration_s) const;

  double now_ms() const;

 private:
  struct ThreadStats {
    int64_t chunks = 0;
    double handling_ms = 0;
    double handling_max_ms = 0;
  };
  void client_loop(const std::vector<PlannedRequest>& requests, std::vector<RequestRecord>& records,
                   std::atomic<size_t>& next, double cell_start_ms, double duration_s, ThreadStats& stats) const;
  void send_one(httplib::Client& client, const PlannedRequest& p, RequestRecord& rec, ThreadStats& stats) const;

  const TrafficSpec& spec_;
  HttpTarget target_;
  std::string path_;
  SteadyClock::time_point t0_;
};

}  // namespace tokenmill::bench
