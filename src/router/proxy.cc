#include "router/proxy.h"

#include <fmt/format.h>

#include <array>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "router/error_body.h"
#include "router/event_log.h"
#include "router/stream_relay.h"
#include "router/upstream_call.h"

namespace tokenmill::router {
namespace {

constexpr std::array<std::string_view, 5> kForwardedRequestHeaders = {"Authorization", "X-Tenant", "Content-Type",
                                                                      "Accept", "X-Request-Id"};
constexpr std::array<std::string_view, 4> kReturnedHeaders = {"X-Request-Id", "Retry-After", "Cache-Control",
                                                              "X-Accel-Buffering"};
// A stream reader blocks beyond this much unsent data (a slow client).
constexpr size_t kMaxStreamBuffer = size_t{4} << 20;

void send_error(httplib::Response& res, int status, const std::string& message, const std::string& code) {
  res.status = status;
  res.set_content(error_json(message, "server_error", code).dump(), "application/json");
}

bool is_retryable_status(int status) { return status == 502 || status == 503 || status == 504; }

// A replica's answer taken whole: what the client gets when no retry helps.
struct WholeAnswer {
  UpstreamHead head;
  std::string body;
  std::string replica_url;
};

void return_headers(const UpstreamHead& head, const std::string& replica_url, httplib::Response& res) {
  for (const std::string_view name : kReturnedHeaders) {
    const auto it = head.headers.find(std::string(name));
    if (it != head.headers.end()) res.set_header(std::string(name), it->second);
  }
  res.set_header("X-Tokenmill-Replica", replica_url);
}

void write_whole(const WholeAnswer& a, httplib::Response& res) {
  return_headers(a.head, a.replica_url, res);
  res.status = a.head.status;
  res.set_content(a.body, a.head.content_type.empty() ? "application/json" : a.head.content_type);
}

UpstreamRequest upstream_request(const httplib::Request& req, bool stream, const ProxyOptions& o) {
  UpstreamRequest u;
  u.method = req.method;
  u.path = req.path;
  u.body = req.body;
  for (const std::string_view name : kForwardedRequestHeaders) {
    const auto it = req.headers.find(std::string(name));
    if (it != req.headers.end()) u.headers.emplace(std::string(name), it->second);
  }
  u.connect_timeout = o.connect_timeout;
  u.read_timeout = stream ? o.stream_idle_timeout : o.read_timeout;
  u.max_buffered = stream ? kMaxStreamBuffer : 0;
  return u;
}

}  // namespace

Proxy::Proxy(Balancer& balancer, ProxyOptions options) : balancer_(balancer), options_(options) {}

void Proxy::handle_generate(const httplib::Request& req, httplib::Response& res, bool is_chat) {
  const std::string tenant(tenant_of(req.get_header_value("X-Tenant"), req.get_header_value("Authorization")));
  const RouteInfo route = route_info(req.body, is_chat, tenant, options_.affinity_bytes);
  forward(req, res, route, balancer_.options().policy);
}

void Proxy::handle_plain(const httplib::Request& req, httplib::Response& res) {
  forward(req, res, RouteInfo{}, Policy::kRoundRobin);
}

void Proxy::answer(httplib::Response& res, std::unique_ptr<UpstreamCall> call, Balancer::Lease lease, bool stream) {
  const UpstreamHead head = call->head();
  return_headers(head, balancer_.replica(static_cast<size_t>(lease.replica())).address.url, res);
  res.status = head.status;
  if (!stream || head.status != 200) {
    res.set_content(call->take_all(), head.content_type.empty() ? "application/json" : head.content_type);
    return;
  }
  const bool sse = head.content_type.rfind("text/event-stream", 0) == 0;
  auto relay = std::make_shared<StreamRelay>(std::move(call), std::move(lease), *this, sse);
  // std::function needs a copyable callable: the relay is shared by the
  // copies of this one provider, never by two streams.
  res.set_chunked_content_provider(head.content_type,
                                   [relay](size_t, httplib::DataSink& sink) { return relay->run(sink); });
}

void Proxy::forward(const httplib::Request& req, httplib::Response& res, const RouteInfo& route, Policy policy) {
  std::vector<int> tried;
  std::vector<std::string> failures;
  std::optional<WholeAnswer> fallback;  // the last 502/503/504 a replica answered
  for (int attempt = 0; attempt < 2; ++attempt) {
    std::optional<Balancer::Lease> lease = balancer_.acquire(route, tried, policy);
    if (!lease) break;
    const int i = lease->replica();
    Replica& replica = balancer_.replica(static_cast<size_t>(i));
    if (!tried.empty()) balancer_.replica(static_cast<size_t>(tried.back())).retries.fetch_add(1);
    auto call = std::make_unique<UpstreamCall>(replica.address, upstream_request(req, route.stream, options_));
    if (!call->wait(!route.stream, [this] { return !cutting(); })) {
      send_error(res, 503, "the router is shutting down", "router_stopping");
      return;
    }
    const UpstreamHead head = call->head();
    const bool transport_failed = call->finished() && !call->succeeded();
    if (!transport_failed && !is_retryable_status(head.status)) {
      answer(res, std::move(call), std::move(*lease), route.stream);
      return;
    }
    replica.failures.fetch_add(1);
    tried.push_back(i);
    if (transport_failed) {
      failures.push_back(fmt::format("{}: {}", replica.address.url, call->error()));
      balancer_.set_up(static_cast<size_t>(i), false, "forwarding failed: " + call->error());
    } else {
      fallback = WholeAnswer{head, call->take_all(), replica.address.url};
      failures.push_back(fmt::format("{}: HTTP {}", replica.address.url, head.status));
    }
    log_event({{"event", "forward_failed"},
               {"replica", replica.address.url},
               {"path", req.path},
               {"attempt", attempt + 1},
               {"error", failures.back()}});
  }
  if (tried.empty()) {
    counters_.no_replica.fetch_add(1);
    send_error(res, 503,
               fmt::format("no replica is up to serve the request (0 of {} healthy); retry later", balancer_.size()),
               "no_replica");
    res.set_header("Retry-After", "1");
    return;
  }
  counters_.failed_requests.fetch_add(1);
  if (fallback) {
    write_whole(*fallback, res);
    return;
  }
  send_error(res, 502, fmt::format("no replica could answer: {}", fmt::join(failures, "; ")), "replica_failed");
}

}  // namespace tokenmill::router
