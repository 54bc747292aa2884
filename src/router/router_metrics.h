// The router's own /metrics in the Prometheus text format: per replica
// (label replica="http://host:port") the requests routed, in flight,
// retried elsewhere, failed, up/down, affinity hits and diversions, the
// polled queue depth and the load the balancer sees; router-wide the 503s
// for no replica, failed requests and client disconnects.
#pragma once

#include <string>
#include <vector>

#include "router/balancer.h"
#include "router/proxy.h"

namespace tokenmill::router {

std::string render_router_metrics(const std::vector<ReplicaView>& replicas, const ProxyCounters& counters,
                                  Policy policy);

}  // namespace tokenmill::router
