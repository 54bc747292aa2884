// The replicas and the choice among them. Each replica's up/down state and
// counters are atomics that the health monitor and the proxy write from
// their own threads; the in-flight counts that the load formula reads are
// changed only under the balancer's mutex, together with the pick, so that
// a burst of concurrent requests sees each other's picks (two requests
// cannot both take the "least loaded" replica on the same stale numbers).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "router/hash_ring.h"
#include "router/replica_address.h"
#include "router/route_info.h"

namespace tokenmill::router {

enum class Policy { kAffinity, kLeastLoad, kRoundRobin };

// "affinity" | "least-load" | "round-robin"; throws Error for anything else.
Policy parse_policy(const std::string& name);
const char* policy_name(Policy policy);

struct Replica {
  explicit Replica(ReplicaAddress a) : address(std::move(a)) {}

  const ReplicaAddress address;
  std::atomic<bool> up{false};
  std::atomic<int64_t> waiting{0};  // last polled tokenmill_requests_waiting
  // Monotonic counters for /metrics.
  std::atomic<int64_t> routed{0};             // requests sent to it (retries included)
  std::atomic<int64_t> retries{0};            // requests retried elsewhere after it failed them
  std::atomic<int64_t> failures{0};           // forwarding failures (transport errors, 502/503/504)
  std::atomic<int64_t> affinity_hits{0};      // affinity picks for which it was the key's own replica
  std::atomic<int64_t> affinity_diverted{0};  // affinity picks it got because the key's own was over the bound
  // Guarded by Balancer::mutex_.
  int64_t in_flight = 0;
  double tokens_in_flight = 0;
};

struct BalancerOptions {
  Policy policy = Policy::kAffinity;
  double load_slack = 0.25;
  int vnodes = 160;  // ring points per replica
};

// One replica's numbers at one moment, for /metrics and /health.
struct ReplicaView {
  std::string url;
  bool up = false;
  int64_t in_flight = 0;
  int64_t waiting = 0;
  double tokens_in_flight = 0;
  double load = 0;
  int64_t routed = 0, retries = 0, failures = 0, affinity_hits = 0, affinity_diverted = 0;
};

class Balancer {
 public:
  // Counts one request in flight on one replica until it is destroyed.
  class Lease {
   public:
    Lease(Balancer* b, int replica, double tokens) : balancer_(b), replica_(replica), tokens_(tokens) {}
    Lease(Lease&& o) noexcept;
    Lease& operator=(Lease&&) = delete;
    Lease(const Lease&) = delete;
    ~Lease();
    int replica() const { return replica_; }

   private:
    Balancer* balancer_;
    int replica_;
    double tokens_;
  };

  Balancer(const std::vector<ReplicaAddress>& replicas, BalancerOptions options);

  // Picks a replica for `route` by `policy` among those up and not in
  // `exclude`, and counts the request on it. nullopt: none is usable.
  std::optional<Lease> acquire(const RouteInfo& route, std::span<const int> exclude, Policy policy);
  std::optional<Lease> acquire(const RouteInfo& route, std::span<const int> exclude) {
    return acquire(route, exclude, options_.policy);
  }

  size_t size() const { return replicas_.size(); }
  Replica& replica(size_t i) { return *replicas_[i]; }
  const Replica& replica(size_t i) const { return *replicas_[i]; }
  int num_up() const;
  // Marks replica i up or down; a change is logged ({"event":
  // "replica_up"|"replica_down"}) with `reason`. Thread-safe.
  void set_up(size_t i, bool up, const std::string& reason);
  const BalancerOptions& options() const { return options_; }
  std::vector<ReplicaView> views() const;

 private:
  void release(int replica, double tokens);

  BalancerOptions options_;
  std::vector<std::unique_ptr<Replica>> replicas_;  // fixed after construction (atomics do not move)
  HashRing ring_;
  mutable std::mutex mutex_;
  uint64_t counter_ = 0;  // round-robin position; guarded by mutex_
};

}  // namespace tokenmill::router
