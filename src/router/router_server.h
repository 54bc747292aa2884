// The router's HTTP front: cpp-httplib's server with the OpenAI routes
// forwarded by the Proxy, plus its own GET /health and GET /metrics.
//
// Life cycle (route_command.cc drives it):
//   RouterServer s(options, proxy);  int port = s.bind();  s.start();
//   ... SIGTERM ...
//   s.stop_and_drain(grace);  // listener closed; in-flight requests get `grace`, then are cut
//   s.join();
//
// Threads: one accept thread plus `http_threads` workers; a stream holds
// one worker (and one upstream thread) for its whole length, so the pool
// bounds the concurrent requests.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <thread>

#include <httplib.h>

#include "router/proxy.h"

namespace tokenmill::router {

struct RouterServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;  // 0: any free port (bind() returns it)
  int http_threads = 256;
  // Generous: each replica enforces its own --max-body-bytes and answers 413.
  size_t max_body_bytes = size_t{64} << 20;
  int client_read_timeout_s = 30;   // reading a request from a client
  int client_write_timeout_s = 60;  // one write to a slow client
};

class RouterServer {
 public:
  // `proxy` must outlive the server.
  RouterServer(RouterServerOptions options, Proxy& proxy);
  ~RouterServer();
  RouterServer(const RouterServer&) = delete;
  RouterServer& operator=(const RouterServer&) = delete;

  // Binds the listening socket; returns the port. Throws Error when the
  // address cannot be bound.
  int bind();
  // Starts accepting on a background thread; returns once it accepts.
  void start();
  // Closes the listener, waits up to `grace` for requests in flight, then
  // cuts the rest (streams end with an error event). True when none was cut.
  bool stop_and_drain(std::chrono::milliseconds grace);
  void join();

 private:
  void register_routes();
  void handle_health(httplib::Response& res);
  int64_t in_flight() const;
  void widen_accept_queue();

  // Pending connections the listener holds before it accepts them.
  static constexpr int kAcceptQueue = 1024;

  RouterServerOptions options_;
  Proxy& proxy_;
  std::unique_ptr<httplib::Server> http_;
  std::thread listen_thread_;
  std::atomic<bool> listen_done_{false};
  int listen_socket_ = -1;  // set by httplib's socket-options hook
};

}  // namespace tokenmill::router
