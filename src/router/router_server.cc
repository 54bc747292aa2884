#include "router/router_server.h"

#include <sys/socket.h>

#include "router/error_body.h"
#include "router/router_metrics.h"
#include "util/error.h"

namespace tokenmill::router {

using nlohmann::json;

RouterServer::RouterServer(RouterServerOptions options, Proxy& proxy)
    : options_(std::move(options)), proxy_(proxy), http_(std::make_unique<httplib::Server>()) {
  const size_t threads = static_cast<size_t>(std::max(options_.http_threads, 4));
  http_->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  http_->set_payload_max_length(options_.max_body_bytes);
  http_->set_read_timeout(options_.client_read_timeout_s, 0);
  http_->set_write_timeout(options_.client_write_timeout_s, 0);
  http_->set_tcp_nodelay(true);  // a relayed token chunk should leave at once
  // Without SO_REUSEPORT (httplib's default sets it), a second router
  // cannot silently bind the same port and take half the connections.
  // The hook also remembers the socket: the last one it saw before a
  // successful bind is the listener, whose backlog bind() widens.
  http_->set_socket_options([this](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    listen_socket_ = sock;
  });
  register_routes();
}

RouterServer::~RouterServer() {
  while (listen_thread_.joinable() && !listen_done_.load()) {
    http_->stop();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  join();
}

int RouterServer::bind() {
  int port = options_.port;
  if (port == 0) {
    port = http_->bind_to_any_port(options_.host);
    if (port < 0) fail("cannot listen on {} (any port)", options_.host);
  } else if (!http_->bind_to_port(options_.host, port)) {
    fail("cannot listen on {}:{} (in use, or not a local address?)", options_.host, port);
  }
  widen_accept_queue();
  return port;
}

// Debian's cpp-httplib is a compiled library that listens with a backlog of
// 5, and its CPPHTTPLIB_LISTEN_BACKLOG only works header-only: a burst of
// new connections on a busy machine overflowed the queue and a client saw a
// connection error. listen() again on a listening socket only resizes its
// queue (the kernel caps it at net.core.somaxconn).
void RouterServer::widen_accept_queue() {
  if (listen_socket_ < 0 || ::listen(listen_socket_, kAcceptQueue) != 0)
    fail("cannot set the accept queue of the router's listener on {}:{}", options_.host, options_.port);
}

void RouterServer::start() {
  listen_thread_ = std::thread([this] {
    http_->listen_after_bind();
    listen_done_.store(true);
  });
  while (!http_->is_running() && !listen_done_.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

int64_t RouterServer::in_flight() const {
  int64_t n = 0;
  for (const ReplicaView& v : proxy_.balancer().views()) n += v.in_flight;
  return n;
}

bool RouterServer::stop_and_drain(std::chrono::milliseconds grace) {
  if (http_->is_running()) http_->stop();
  const auto deadline = std::chrono::steady_clock::now() + grace;
  while (in_flight() > 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const bool drained = in_flight() == 0;
  proxy_.cut_in_flight();
  return drained;
}

void RouterServer::join() {
  if (listen_thread_.joinable()) listen_thread_.join();
}

void RouterServer::handle_health(httplib::Response& res) {
  const std::vector<ReplicaView> views = proxy_.balancer().views();
  json replicas = json::array();
  int up = 0;
  for (const ReplicaView& v : views) {
    up += v.up ? 1 : 0;
    replicas.push_back(
        {{"url", v.url}, {"up", v.up}, {"in_flight", v.in_flight}, {"waiting", v.waiting}, {"load", v.load}});
  }
  const json body = {{"status", up > 0 ? "ok" : "no_replica"},
                     {"policy", policy_name(proxy_.balancer().options().policy)},
                     {"replicas_up", up},
                     {"replicas", replicas}};
  res.status = up > 0 ? 200 : 503;
  if (up == 0) res.set_header("Retry-After", "1");
  res.set_content(body.dump(), "application/json");
}

void RouterServer::register_routes() {
  http_->Get("/health", [this](const httplib::Request&, httplib::Response& res) { handle_health(res); });
  http_->Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(
        render_router_metrics(proxy_.balancer().views(), proxy_.counters(), proxy_.balancer().options().policy),
        "text/plain; version=0.0.4; charset=utf-8");
  });
  http_->Post("/v1/completions",
              [this](const httplib::Request& req, httplib::Response& res) { proxy_.handle_generate(req, res, false); });
  http_->Post("/v1/chat/completions",
              [this](const httplib::Request& req, httplib::Response& res) { proxy_.handle_generate(req, res, true); });
  const auto plain = [this](const httplib::Request& req, httplib::Response& res) { proxy_.handle_plain(req, res); };
  http_->Get("/v1/models", plain);
  http_->Get(R"(/v1/models/(.+))", plain);
  http_->Post("/tokenize", plain);
  http_->Post("/detokenize", plain);
  // Statuses no handler produced (unknown route, body too large) still get
  // an OpenAI error body.
  http_->set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    const std::string message = res.status == 404   ? "no route " + req.method + " " + req.path + " on the router"
                                : res.status == 413 ? "request body too large"
                                                    : "HTTP " + std::to_string(res.status);
    res.set_content(error_json(message, "invalid_request_error", std::to_string(res.status)).dump(),
                    "application/json");
  });
}

}  // namespace tokenmill::router
