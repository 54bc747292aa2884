// Internal to the HTTP front (http_front.h): the state HttpFront::Impl
// shares between its files. Only the front's own .cc files include this.
//
//   http_front.cc           the public HttpFront, the listener, accepting,
//                           refusing and closing connections
//   http_front_requests.cc  parsing what arrived, dispatching to a worker,
//                           writing the response, handing it back
//   http_front_loop.cc      the event loop: socket events and deadlines
//
// Thread-safety: the loop thread owns conns, per_client and every
// connection's phase and parser; workers only run respond() and write
// through Connection::send. done (done_mu) carries finished responses back
// to the loop, st (stats_mu) is read by HttpFront::stats.
#pragma once

#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "http/http_connection.h"
#include "http/http_front.h"
#include "http/worker_pool.h"

namespace tokenmill::http {

constexpr size_t kReadChunk = 16 * 1024;
constexpr auto kTick = std::chrono::milliseconds(50);  // deadline scan period
constexpr auto kStopFlush = std::chrono::seconds(1);   // stop(): time left to write queued output

struct HttpFront::Impl {
  HttpFrontOptions opt;
  HttpFrontHooks hooks;
  int listen_fd = -1;
  int epoll_fd = -1;
  int wake_fd = -1;
  std::thread loop_thread;
  WorkerPool workers;
  WorkerPool light_workers;
  std::atomic<bool> stopping{false};
  std::atomic<bool> accept_closed{false};
  std::atomic<bool> listener_close_requested{false};
  bool accept_paused = false;  // out of descriptors: the listener is unwatched until the next tick
  Clock::time_point stop_flush_deadline;

  // Loop thread only.
  std::unordered_map<int, std::shared_ptr<Connection>> conns;
  std::map<std::string, int> per_client;

  // Responses finished by workers, handed back to the loop.
  std::mutex done_mu;
  std::vector<std::pair<std::shared_ptr<Connection>, bool>> done;  // connection, keep alive

  mutable std::mutex stats_mu;
  HttpFrontStats st;

  Impl(HttpFrontOptions o, HttpFrontHooks h);

  // Any thread.
  void count(int64_t HttpFrontStats::*field, int64_t delta = 1);
  void wake();

  // The listener and the connections' lifetime (http_front.cc). Loop
  // thread, but bind_listener, which bind() calls before the loop starts.
  int bind_listener();
  static std::string peer_address(const sockaddr_storage& ss);
  void refuse(int fd, int status, const std::string& message);
  void accept_all();
  void close_conn(const std::shared_ptr<Connection>& c);
  void linger(const std::shared_ptr<Connection>& c);
  void close_when_flushed(const std::shared_ptr<Connection>& c);
  void close_listener();

  // Requests and responses (http_front_requests.cc). Loop thread, but
  // respond, which runs on a worker.
  void fail_request(const std::shared_ptr<Connection>& c, int status, const std::string& message);
  void parse(const std::shared_ptr<Connection>& c);
  void dispatch(const std::shared_ptr<Connection>& c);
  void respond(const std::shared_ptr<Connection>& c, HttpRequest& req);
  void finish_responses();

  // The event loop (http_front_loop.cc). Loop thread.
  void on_readable(const std::shared_ptr<Connection>& c);
  void on_writable(const std::shared_ptr<Connection>& c);
  void on_event(int fd, uint32_t events);
  void check_deadlines();
  bool output_pending() const;
  void run();
};

}  // namespace tokenmill::http
