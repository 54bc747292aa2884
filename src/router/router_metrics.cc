#include "router/router_metrics.h"

#include <fmt/format.h>

#include <functional>

namespace tokenmill::router {
namespace {

// Label values escaped as the text format asks (\\, \", \n).
std::string label_value(const std::string& s) {
  std::string out;
  for (const char c : s) {
    if (c == '\\' || c == '"') out.push_back('\\');
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out.push_back(c);
  }
  return out;
}

void family(std::string& out, const char* name, const char* type, const char* help,
            const std::vector<ReplicaView>& replicas, const std::function<double(const ReplicaView&)>& value) {
  out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
  for (const ReplicaView& r : replicas)
    out += fmt::format("{}{{replica=\"{}\"}} {}\n", name, label_value(r.url), value(r));
}

void single(std::string& out, const char* name, const char* type, const char* help, double value) {
  out += fmt::format("# HELP {} {}\n# TYPE {} {}\n{} {}\n", name, help, name, type, name, value);
}

}  // namespace

std::string render_router_metrics(const std::vector<ReplicaView>& replicas, const ProxyCounters& counters,
                                  Policy policy) {
  std::string out;
  auto d = [](int64_t v) { return static_cast<double>(v); };
  family(out, "tokenmill_router_requests_total", "counter", "Requests sent to the replica (retries included).",
         replicas, [&](const ReplicaView& r) { return d(r.routed); });
  family(out, "tokenmill_router_in_flight", "gauge", "Requests this router has in flight on the replica.", replicas,
         [&](const ReplicaView& r) { return d(r.in_flight); });
  family(out, "tokenmill_router_retries_total", "counter", "Requests retried on another replica after this one failed.",
         replicas, [&](const ReplicaView& r) { return d(r.retries); });
  family(out, "tokenmill_router_failures_total", "counter",
         "Forwarding failures: transport errors, 502/503/504 answers, streams cut mid-way.", replicas,
         [&](const ReplicaView& r) { return d(r.failures); });
  family(out, "tokenmill_router_replica_up", "gauge", "1 when the replica passes its health check, else 0.", replicas,
         [](const ReplicaView& r) { return r.up ? 1.0 : 0.0; });
  family(out, "tokenmill_router_affinity_hits_total", "counter",
         "Affinity picks that went to the key's own replica (prefix cache likely warm).", replicas,
         [&](const ReplicaView& r) { return d(r.affinity_hits); });
  family(out, "tokenmill_router_affinity_diverted_total", "counter",
         "Affinity picks sent here because the key's own replica was over the load bound.", replicas,
         [&](const ReplicaView& r) { return d(r.affinity_diverted); });
  family(out, "tokenmill_router_replica_waiting", "gauge", "The replica's queue depth as last polled.", replicas,
         [&](const ReplicaView& r) { return d(r.waiting); });
  family(out, "tokenmill_router_replica_load", "gauge", "The load the balancer sees (docs/router.md).", replicas,
         [](const ReplicaView& r) { return r.load; });
  single(out, "tokenmill_router_no_replica_total", "counter", "Requests answered 503 because no replica was up.",
         d(counters.no_replica.load()));
  single(out, "tokenmill_router_failed_requests_total", "counter",
         "Requests that ended in a 502 or a stream error event after any retry.", d(counters.failed_requests.load()));
  single(out, "tokenmill_router_client_disconnects_total", "counter",
         "Streams cancelled upstream because the client went away.", d(counters.client_disconnects.load()));
  out += fmt::format(
      "# HELP tokenmill_router_info The routing policy.\n# TYPE tokenmill_router_info gauge\n"
      "tokenmill_router_info{{policy=\"{}\"}} 1\n",
      policy_name(policy));
  return out;
}

}  // namespace tokenmill::router
