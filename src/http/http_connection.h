// Internal to the HTTP front (http_front.h): one client connection, its
// output queue and how it is flushed, and the chunked body of a streamed
// response written to it. Only the front's own files include this.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>

#include "http/http_message.h"
#include "http/http_request_parser.h"

namespace tokenmill::http {

using Clock = std::chrono::steady_clock;

// Where a connection is in its request/response cycle. The loop reads
// only in kReading; in kBusy a worker owns the response; kClosing flushes
// the last response; kLingering has sent it all and half-closed, and reads
// and discards what the client still sends for a moment: closing with
// unread input would reset the connection and could destroy the answer
// (a 413 while the client is still sending its body) before it is read.
enum class Phase { kReading, kBusy, kClosing, kLingering };
constexpr auto kLinger = std::chrono::seconds(2);

// One client connection. The loop thread owns phase, parser and deadlines;
// the output queue is shared with the worker writing the response (mu).
struct Connection final : ConnectionView {
  int fd = -1;
  int epoll_fd = -1;
  std::string addr;
  HttpRequestParser parser;
  std::string pending_in;  // bytes read past the end of the current request (pipelining)
  Phase phase = Phase::kReading;
  Clock::time_point idle_since;     // last response finished (or accepted)
  Clock::time_point request_start;  // first byte of the current request
  Clock::time_point head_done;
  Clock::time_point linger_until;
  bool reading_request = false;  // bytes of a request have arrived
  bool keep_alive = true;

  mutable std::mutex mu;
  std::condition_variable drained;  // out shrank or the connection broke
  std::string out;
  size_t out_off = 0;
  bool out_armed = false;  // EPOLLOUT registered
  Clock::time_point last_progress;
  std::atomic<bool> broken{false};

  Connection(int f, int ep, std::string a, const HttpLimits& limits)
      : fd(f), epoll_fd(ep), addr(std::move(a)), parser(limits) {}
  // Closes the descriptor: the last owner (loop or worker) does.
  ~Connection() override;

  bool client_gone() const override { return broken.load(); }

  // Interest set for the current phase and output (mu held).
  void update_interest_locked();
  // Writes what the socket takes now (mu held). False on a broken pipe.
  bool flush_locked();
  // Queues bytes (any thread). False once the connection is gone.
  bool send(std::string_view data);
  // Bytes not yet taken by the client, the kernel's send queue included
  // (mu held).
  size_t unsent_locked() const;
  // Marks the connection gone and wakes writers waiting on it (mu held).
  void mark_broken_locked();
};

// The chunked body of a streamed response. Used on the worker thread that
// runs the handler; the connection must outlive it.
class ChunkedStream final : public ResponseStream {
 public:
  explicit ChunkedStream(Connection& c) : c_(c) {}
  bool write(std::string_view data) override;
  size_t unsent_bytes() const override;
  bool wait_unsent_below(size_t bytes, std::chrono::milliseconds timeout) override;
  bool client_gone() const override { return c_.broken.load(); }

 private:
  Connection& c_;
};

// The status line and headers of `res`, framed by Content-Length (its
// body) or, when `chunked`, by Transfer-Encoding.
std::string response_head(const HttpResponse& res, bool keep_alive, bool chunked);

}  // namespace tokenmill::http
