#include "router/balancer.h"

#include <algorithm>

#include "router/event_log.h"
#include "router/load.h"
#include "util/error.h"

namespace tokenmill::router {

Policy parse_policy(const std::string& name) {
  if (name == "affinity") return Policy::kAffinity;
  if (name == "least-load") return Policy::kLeastLoad;
  if (name == "round-robin") return Policy::kRoundRobin;
  fail("--policy '{}': use affinity, least-load or round-robin", name);
}

const char* policy_name(Policy policy) {
  switch (policy) {
    case Policy::kAffinity: return "affinity";
    case Policy::kLeastLoad: return "least-load";
    case Policy::kRoundRobin: return "round-robin";
  }
  return "?";
}

namespace {

std::vector<std::string> urls_of(const std::vector<ReplicaAddress>& replicas) {
  std::vector<std::string> urls;
  for (const ReplicaAddress& r : replicas) urls.push_back(r.url);
  return urls;
}

}  // namespace

Balancer::Lease::Lease(Lease&& o) noexcept : balancer_(o.balancer_), replica_(o.replica_), tokens_(o.tokens_) {
  o.balancer_ = nullptr;
}

Balancer::Lease::~Lease() {
  if (balancer_) balancer_->release(replica_, tokens_);
}

Balancer::Balancer(const std::vector<ReplicaAddress>& replicas, BalancerOptions options)
    : options_(options), ring_(urls_of(replicas), options.vnodes) {
  for (const ReplicaAddress& a : replicas) replicas_.push_back(std::make_unique<Replica>(a));
}

int Balancer::num_up() const {
  int n = 0;
  for (const auto& r : replicas_) n += r->up.load() ? 1 : 0;
  return n;
}

void Balancer::set_up(size_t i, bool up, const std::string& reason) {
  Replica& r = *replicas_[i];
  if (r.up.exchange(up) == up) return;
  log_event({{"event", up ? "replica_up" : "replica_down"}, {"replica", r.address.url}, {"reason", reason}});
}

std::optional<Balancer::Lease> Balancer::acquire(const RouteInfo& route, std::span<const int> exclude, Policy policy) {
  const size_t n = replicas_.size();
  std::vector<char> usable(n);
  std::vector<LoadInputs> inputs(n);
  std::vector<double> loads(n);
  std::lock_guard<std::mutex> lock(mutex_);
  for (size_t i = 0; i < n; ++i) {
    const Replica& r = *replicas_[i];
    usable[i] = r.up.load() && std::find(exclude.begin(), exclude.end(), static_cast<int>(i)) == exclude.end();
    inputs[i] = {r.waiting.load(), r.in_flight, r.tokens_in_flight};
  }
  const double mean_tokens = mean_request_tokens(inputs);
  for (size_t i = 0; i < n; ++i) loads[i] = replica_load(inputs[i], mean_tokens);
  Pick pick;
  switch (policy) {
    case Policy::kAffinity: pick = pick_affinity(ring_, route.affinity_key, loads, usable, options_.load_slack); break;
    case Policy::kLeastLoad: pick.replica = pick_least_load(loads, usable, counter_++); break;
    case Policy::kRoundRobin: pick.replica = pick_round_robin(usable, counter_++); break;
  }
  if (pick.replica < 0) return std::nullopt;
  Replica& r = *replicas_[static_cast<size_t>(pick.replica)];
  const double tokens = static_cast<double>(std::max<int64_t>(route.estimated_tokens, 1));
  ++r.in_flight;
  r.tokens_in_flight += tokens;
  r.routed.fetch_add(1);
  if (policy == Policy::kAffinity) (pick.preferred ? r.affinity_hits : r.affinity_diverted).fetch_add(1);
  return Lease(this, pick.replica, tokens);
}

void Balancer::release(int replica, double tokens) {
  std::lock_guard<std::mutex> lock(mutex_);
  Replica& r = *replicas_[static_cast<size_t>(replica)];
  --r.in_flight;
  r.tokens_in_flight = r.in_flight > 0 ? std::max(0.0, r.tokens_in_flight - tokens) : 0.0;
}

std::vector<ReplicaView> Balancer::views() const {
  std::vector<ReplicaView> out(replicas_.size());
  std::vector<LoadInputs> inputs(replicas_.size());
  std::lock_guard<std::mutex> lock(mutex_);
  for (size_t i = 0; i < replicas_.size(); ++i) {
    const Replica& r = *replicas_[i];
    inputs[i] = {r.waiting.load(), r.in_flight, r.tokens_in_flight};
  }
  const double mean_tokens = mean_request_tokens(inputs);
  for (size_t i = 0; i < replicas_.size(); ++i) {
    const Replica& r = *replicas_[i];
    ReplicaView& v = out[i];
    v.url = r.address.url;
    v.up = r.up.load();
    v.in_flight = r.in_flight;
    v.waiting = inputs[i].waiting;
    v.tokens_in_flight = r.tokens_in_flight;
    v.load = replica_load(inputs[i], mean_tokens);
    v.routed = r.routed.load();
    v.retries = r.retries.load();
    v.failures = r.failures.load();
    v.affinity_hits = r.affinity_hits.load();
    v.affinity_diverted = r.affinity_diverted.load();
  }
  return out;
}

}  // namespace tokenmill::router
