// Forwards one client request to a replica and relays the answer.
//
// The body and the headers that matter (Authorization, X-Tenant,
// Content-Type, Accept, X-Request-Id) go upstream unchanged; the answer
// comes back with its status, Content-Type, X-Request-Id and Retry-After,
// plus X-Tokenmill-Replica naming the replica that served it.
//
// Failures: a request whose forwarding fails before any byte reached the
// client (no connection, a reset or timeout before the answer, or a
// 502/503/504 from the replica) is retried once on another replica, and
// the failed replica is marked down when the transport failed (the health
// monitor brings it back). Once a stream has started, a failure ends it
// with an error event and "data: [DONE]"; a whole answer that cannot be
// had gets a 502 in the OpenAI error shape; no replica up gets a 503. A
// client that leaves a stream cancels the upstream request.
//
// Thread-safety: the handlers run concurrently on the HTTP workers.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>

#include <httplib.h>

#include "router/balancer.h"
#include "router/route_info.h"

namespace tokenmill::router {

struct ProxyOptions {
  size_t affinity_bytes = 256;
  std::chrono::milliseconds connect_timeout{3000};
  // Longest wait for a whole (non-stream) answer; a stream may be silent
  // for stream_idle_timeout (replicas send keep-alives every 500 ms).
  std::chrono::milliseconds read_timeout{600000};
  std::chrono::milliseconds stream_idle_timeout{30000};
};

// Router-wide counters for /metrics.
struct ProxyCounters {
  std::atomic<int64_t> no_replica{0};          // 503: no replica up
  std::atomic<int64_t> failed_requests{0};     // 502 or an error event sent to the client
  std::atomic<int64_t> client_disconnects{0};  // streams cancelled because the client left
};

class UpstreamCall;

class Proxy {
 public:
  // `balancer` must outlive the proxy.
  Proxy(Balancer& balancer, ProxyOptions options);

  // POST /v1/completions (is_chat false) and /v1/chat/completions: routed
  // by the balancer's policy.
  void handle_generate(const httplib::Request& req, httplib::Response& res, bool is_chat);
  // Anything else forwarded as it is (GET /v1/models, POST /tokenize ...):
  // no prompt to key on, so round-robin over the replicas up.
  void handle_plain(const httplib::Request& req, httplib::Response& res);

  // From now on waits and streams in flight end at once (a stream with an
  // error event, a wait with 503). Called after the shutdown grace.
  void cut_in_flight() { cutting_.store(true); }
  bool cutting() const { return cutting_.load(); }

  const ProxyCounters& counters() const { return counters_; }
  ProxyCounters& counters() { return counters_; }
  Balancer& balancer() { return balancer_; }
  const ProxyOptions& options() const { return options_; }

 private:
  void forward(const httplib::Request& req, httplib::Response& res, const RouteInfo& route, Policy policy);
  // Relays an answer that will not be retried: whole, or as a stream.
  void answer(httplib::Response& res, std::unique_ptr<UpstreamCall> call, Balancer::Lease lease, bool stream);

  Balancer& balancer_;
  ProxyOptions options_;
  ProxyCounters counters_;
  std::atomic<bool> cutting_{false};
};

}  // namespace tokenmill::router
