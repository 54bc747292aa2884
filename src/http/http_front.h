// The HTTP/1.1 front end of `tokenmill serve`: one event-loop thread
// (epoll) accepts connections, reads and parses requests and writes
// queued output; a pool of worker threads runs the handlers. Reading a
// request never occupies a worker, so slow or idle clients cost a socket
// and a few KB, not a thread: only complete requests reach the pool.
//
// Limits that hold for every framing (http_request_parser.h): head size
// and header count (431), body size for Content-Length and chunked bodies
// alike (413 before the body is buffered), malformed heads (400) at once.
// Deadlines are totals, not per byte: the head must arrive within
// header_timeout of its first byte, the body within body_timeout of the
// end of the head (408 otherwise); an idle keep-alive connection closes
// after keep_alive_timeout; output the client does not take for
// write_timeout drops the connection. Connections are bounded overall and
// per client address; beyond either the client gets a 503 and a close.
//
// Output is written by the thread that produces it (no hop through the
// loop when the socket takes it at once); what the socket does not take
// is queued and flushed by the loop. A stream sees how much the client
// has not taken yet (ResponseStream::unsent_bytes) to apply backpressure.
// A client that closes its side while its request runs is seen by the
// loop and reported through ConnectionView::client_gone.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "http/http_message.h"
#include "http/http_request_parser.h"
#include "http/http_stats.h"

namespace tokenmill::http {

struct HttpFrontOptions {
  std::string host = "127.0.0.1";
  int port = 0;  // 0: any free port
  HttpLimits limits;
  int max_connections = 4096;
  int max_connections_per_client = 1024;
  std::chrono::milliseconds header_timeout{10'000};
  std::chrono::milliseconds body_timeout{30'000};
  std::chrono::milliseconds keep_alive_timeout{5'000};
  std::chrono::milliseconds write_timeout{30'000};
  int worker_threads = 256;  // handlers running at once (streams hold one each)
  int light_threads = 2;     // for HttpFrontHooks::is_light requests
};

struct HttpFrontHooks {
  // Routes and runs one request (on a worker thread).
  std::function<void(HttpRequest&, HttpResponse&)> handle;
  // After the response was written (or the connection dropped), on the
  // same worker thread: logging.
  std::function<void(const HttpRequest&, const HttpResponse&, bool completed)> after;
  // The response for an error the front answers itself (status, message):
  // parse errors, 408, connection refusals.
  std::function<HttpResponse(int status, const std::string& message)> error;
  // Counted when the front answers itself (status), for the server's stats.
  std::function<void(int status)> on_front_error;
  // Requests that are answered at once (health checks, metrics): they run
  // on a small pool of their own, so that they are answered even while
  // every handler thread holds a stream.
  std::function<bool(const HttpRequest&)> is_light;
};

class HttpFront {
 public:
  HttpFront(HttpFrontOptions options, HttpFrontHooks hooks);
  // Stops (closing every connection) and joins.
  ~HttpFront();
  HttpFront(const HttpFront&) = delete;
  HttpFront& operator=(const HttpFront&) = delete;

  // Binds and listens. Returns the port. Throws Error when it cannot.
  int bind();
  // Starts the event loop; returns at once.
  void start();
  // Closes the listener; requests in progress go on, and open connections
  // stay until their keep-alive timeout, each answer now closing its
  // connection (the handlers refuse new requests during the drain).
  void stop_accepting();
  // Closes every connection and waits for the loop and the workers (a
  // handler still running is waited for: end the engine's work first).
  void stop();

  HttpFrontStats stats() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace tokenmill::http
