#include "http/http_front.h"

#include <fmt/format.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/sockios.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "http/http_status.h"
#include "util/error.h"

namespace tokenmill::http {

using Clock = std::chrono::steady_clock;

namespace {

// Where a connection is in its request/response cycle. The loop reads
// only in kReading; in kBusy a worker owns the response; kClosing flushes
// the last response; kLingering has sent it all and half-closed, and reads
// and discards what the client still sends for a moment: closing with
// unread input would reset the connection and could destroy the answer
// (a 413 while the client is still sending its body) before it is read.
enum class Phase { kReading, kBusy, kClosing, kLingering };
constexpr auto kLinger = std::chrono::seconds(2);

constexpr size_t kReadChunk = 16 * 1024;
constexpr auto kTick = std::chrono::milliseconds(50);  // deadline scan period
constexpr auto kStopFlush = std::chrono::seconds(1);   // stop(): time left to write queued output

}  // namespace

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
  ~Connection() override {
    if (fd >= 0) ::close(fd);
  }

  bool client_gone() const override { return broken.load(); }

  // Interest set for the current phase and output (mu held).
  void update_interest_locked() {
    uint32_t ev = EPOLLRDHUP;
    if (phase == Phase::kReading || phase == Phase::kLingering) ev |= EPOLLIN;
    const bool want_out = out_off < out.size();
    if (want_out) ev |= EPOLLOUT;
    out_armed = want_out;
    epoll_event e{};
    e.events = ev;
    e.data.fd = fd;
    epoll_ctl(epoll_fd, EPOLL_CTL_MOD, fd, &e);
  }

  // Writes what the socket takes now (mu held). False on a broken pipe.
  bool flush_locked() {
    while (out_off < out.size()) {
      const ssize_t n = ::send(fd, out.data() + out_off, out.size() - out_off, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        out_off += static_cast<size_t>(n);
        last_progress = Clock::now();
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      return false;
    }
    if (out_off == out.size()) {
      out.clear();
      out_off = 0;
    } else if (out_off > (1u << 20)) {  // keep the queue from growing a dead prefix
      out.erase(0, out_off);
      out_off = 0;
    }
    return true;
  }

  // Queues bytes (any thread). False once the connection is gone.
  bool send(std::string_view data) {
    std::lock_guard<std::mutex> lock(mu);
    if (broken.load()) return false;
    if (out.empty()) last_progress = Clock::now();
    out.append(data);
    if (!flush_locked()) {
      mark_broken_locked();
      return false;
    }
    if ((out_off < out.size()) != out_armed) update_interest_locked();
    return true;
  }

  size_t unsent_locked() const {
    int queued = 0;  // the kernel's send queue: written but not acknowledged
    if (ioctl(fd, SIOCOUTQ, &queued) != 0) queued = 0;
    return out.size() - out_off + static_cast<size_t>(std::max(queued, 0));
  }

  void mark_broken_locked() {
    broken.store(true);
    drained.notify_all();
  }
};

namespace {

// The chunked body of a streamed response.
class ChunkedStream final : public ResponseStream {
 public:
  explicit ChunkedStream(Connection& c) : c_(c) {}
  bool write(std::string_view data) override {
    if (data.empty()) return !c_.broken.load();
    return c_.send(fmt::format("{:x}\r\n{}\r\n", data.size(), data));
  }
  size_t unsent_bytes() const override {
    std::lock_guard<std::mutex> lock(c_.mu);
    return c_.unsent_locked();
  }
  bool wait_unsent_below(size_t bytes, std::chrono::milliseconds timeout) override {
    const auto deadline = Clock::now() + timeout;
    std::unique_lock<std::mutex> lock(c_.mu);
    while (!c_.broken.load() && c_.unsent_locked() > bytes) {
      // The kernel's queue drains without telling the loop: look again
      // every few milliseconds as well as on every flush.
      if (c_.drained.wait_until(lock, std::min(deadline, Clock::now() + std::chrono::milliseconds(20))) ==
              std::cv_status::timeout &&
          Clock::now() >= deadline)
        break;
    }
    return !c_.broken.load() && c_.unsent_locked() <= bytes;
  }
  bool client_gone() const override { return c_.broken.load(); }

 private:
  Connection& c_;
};

std::string response_head(const HttpResponse& res, bool keep_alive, bool chunked) {
  std::string h = fmt::format("HTTP/1.1 {} {}\r\n", res.status, status_reason(res.status));
  if (!res.content_type.empty()) h += fmt::format("Content-Type: {}\r\n", res.content_type);
  for (const auto& [name, value] : res.headers) h += fmt::format("{}: {}\r\n", name, value);
  if (chunked) {
    h += "Transfer-Encoding: chunked\r\n";
  } else {
    h += fmt::format("Content-Length: {}\r\n", res.body.size());
  }
  h += keep_alive ? "Connection: keep-alive\r\n\r\n" : "Connection: close\r\n\r\n";
  return h;
}

// Threads started as work arrives and no thread is idle, up to a bound;
// beyond it tasks wait in order.
class WorkerPool {
 public:
  explicit WorkerPool(int max_threads) : max_threads_(max_threads) {}
  ~WorkerPool() { stop(); }
  void post(std::function<void()> task) {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;  // stopping: the connection is closed unanswered
    tasks_.push_back(std::move(task));
    if (idle_ < static_cast<int>(tasks_.size()) && static_cast<int>(threads_.size()) < max_threads_)
      threads_.emplace_back([this] { loop(); });
    cv_.notify_one();
  }
  void stop() {
    std::vector<std::thread> threads;
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
      threads.swap(threads_);
      stopped_threads_ += static_cast<int64_t>(threads.size());
    }
    cv_.notify_all();
    for (std::thread& t : threads)
      if (t.joinable()) t.join();
  }
  int64_t size() const {
    std::lock_guard<std::mutex> lock(mu_);
    return static_cast<int64_t>(threads_.size()) + stopped_threads_;
  }

 private:
  void loop() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      ++idle_;
      cv_.wait(lock, [this] { return stopping_ || !tasks_.empty(); });
      --idle_;
      if (tasks_.empty()) return;  // stopping, nothing left
      std::function<void()> task = std::move(tasks_.front());
      tasks_.pop_front();
      lock.unlock();
      task();
      lock.lock();
    }
  }

  const int max_threads_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  std::vector<std::thread> threads_;
  int idle_ = 0;
  bool stopping_ = false;
  int64_t stopped_threads_ = 0;
};

}  // namespace

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

  Impl(HttpFrontOptions o, HttpFrontHooks h)
      : opt(std::move(o)), hooks(std::move(h)), workers(opt.worker_threads), light_workers(opt.light_threads) {}

  void count(int64_t HttpFrontStats::*field, int64_t delta = 1) {
    std::lock_guard<std::mutex> lock(stats_mu);
    st.*field += delta;
  }

  void wake() {
    const uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(wake_fd, &one, sizeof(one));
  }

  int bind_listener() {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    addrinfo* res = nullptr;
    const std::string port = std::to_string(opt.port);
    if (const int rc = getaddrinfo(opt.host.c_str(), port.c_str(), &hints, &res); rc != 0)
      fail("cannot listen on {}:{}: {}", opt.host, opt.port, gai_strerror(rc));
    std::string last_error = "no address";
    for (addrinfo* a = res; a; a = a->ai_next) {
      const int fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
      if (fd < 0) continue;
      int yes = 1;
      setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
      if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, 1024) == 0) {
        listen_fd = fd;
        break;
      }
      last_error = std::strerror(errno);
      ::close(fd);
    }
    freeaddrinfo(res);
    if (listen_fd < 0)
      fail("cannot listen on {}:{} ({}: in use, or not a local address?)", opt.host, opt.port, last_error);
    sockaddr_storage ss{};
    socklen_t len = sizeof(ss);
    getsockname(listen_fd, reinterpret_cast<sockaddr*>(&ss), &len);
    return ntohs(ss.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6&>(ss).sin6_port
                                          : reinterpret_cast<sockaddr_in&>(ss).sin_port);
  }

  static std::string peer_address(const sockaddr_storage& ss) {
    char buf[INET6_ADDRSTRLEN] = {};
    if (ss.ss_family == AF_INET6) {
      inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6&>(ss).sin6_addr, buf, sizeof(buf));
    } else {
      inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in&>(ss).sin_addr, buf, sizeof(buf));
    }
    return buf;
  }

  // A refusal the loop writes itself before closing: best effort, the
  // socket's buffer takes a short answer at once.
  void refuse(int fd, int status, const std::string& message) {
    HttpResponse r = hooks.error(status, message);
    r.set_header("Retry-After", "1");
    const std::string bytes = response_head(r, false, false) + r.body;
    [[maybe_unused]] ssize_t n = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (hooks.on_front_error) hooks.on_front_error(status);
    ::shutdown(fd, SHUT_WR);
    // Input left unread would turn the close into a reset that can destroy
    // the answer; take what has arrived so far.
    char buf[4096];
    while (::recv(fd, buf, sizeof(buf), MSG_DONTWAIT) > 0) {
    }
    ::close(fd);
  }

  void accept_all() {
    for (;;) {
      sockaddr_storage ss{};
      socklen_t len = sizeof(ss);
      const int fd = accept4(listen_fd, reinterpret_cast<sockaddr*>(&ss), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
          // The pending connection stays queued and the listener readable:
          // stop watching it for a tick instead of spinning on it.
          epoll_ctl(epoll_fd, EPOLL_CTL_DEL, listen_fd, nullptr);
          accept_paused = true;
        }
        return;
      }
      const std::string addr = peer_address(ss);
      if (static_cast<int>(conns.size()) >= opt.max_connections) {
        count(&HttpFrontStats::connections_refused);
        refuse(fd, 503, fmt::format("too many connections (the server's limit is {})", opt.max_connections));
        continue;
      }
      if (per_client[addr] >= opt.max_connections_per_client) {
        count(&HttpFrontStats::connections_refused);
        refuse(fd, 503,
               fmt::format("too many connections from {} (the limit per client is {})", addr,
                           opt.max_connections_per_client));
        continue;
      }
      int yes = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof(yes));  // a token chunk should leave at once
      auto c = std::make_shared<Connection>(fd, epoll_fd, addr, opt.limits);
      c->idle_since = c->last_progress = Clock::now();
      epoll_event e{};
      e.events = EPOLLIN | EPOLLRDHUP;
      e.data.fd = fd;
      if (epoll_ctl(epoll_fd, EPOLL_CTL_ADD, fd, &e) != 0) continue;  // c's destructor closes fd
      ++per_client[addr];
      conns.emplace(fd, std::move(c));
      count(&HttpFrontStats::connections_accepted);
      count(&HttpFrontStats::connections_open);
    }
  }

  void close_conn(const std::shared_ptr<Connection>& c) {
    auto it = conns.find(c->fd);
    if (it == conns.end() || it->second != c) return;  // closed already
    {
      std::lock_guard<std::mutex> lock(c->mu);
      c->mark_broken_locked();
    }
    epoll_ctl(epoll_fd, EPOLL_CTL_DEL, c->fd, nullptr);
    // shutdown, not close: a worker may still hold the descriptor, which
    // must not be reused under it; the last owner closes it.
    ::shutdown(c->fd, SHUT_RDWR);
    if (--per_client[c->addr] <= 0) per_client.erase(c->addr);
    conns.erase(c->fd);
    count(&HttpFrontStats::connections_open, -1);
  }

  // The last response is out: half-close and linger (Phase).
  void linger(const std::shared_ptr<Connection>& c) {
    ::shutdown(c->fd, SHUT_WR);
    std::lock_guard<std::mutex> lock(c->mu);
    c->phase = Phase::kLingering;
    c->linger_until = Clock::now() + kLinger;
    c->update_interest_locked();
  }

  // After the last response was queued (kClosing): linger once it is all
  // out, close at once if the connection broke; else EPOLLOUT goes on.
  void close_when_flushed(const std::shared_ptr<Connection>& c) {
    bool broken, flushed;
    {
      std::lock_guard<std::mutex> lock(c->mu);
      broken = c->broken.load();
      flushed = c->out_off == c->out.size();
    }
    if (broken) {
      close_conn(c);
    } else if (flushed) {
      linger(c);
    }
  }

  // Answers an error the front found itself and closes after it.
  void fail_request(const std::shared_ptr<Connection>& c, int status, const std::string& message) {
    if (hooks.on_front_error) hooks.on_front_error(status);
    const HttpResponse r = hooks.error(status, message);
    {
      std::lock_guard<std::mutex> lock(c->mu);
      c->phase = Phase::kClosing;
      c->out += response_head(r, false, false) + r.body;
      if (c->flush_locked()) {
        c->update_interest_locked();
      } else {
        c->mark_broken_locked();
      }
    }
    close_when_flushed(c);
  }

  // Feeds what has arrived to the parser; dispatches a complete request.
  void parse(const std::shared_ptr<Connection>& c) {
    while (!c->pending_in.empty() && c->phase == Phase::kReading) {
      if (!c->reading_request) {
        c->reading_request = true;
        c->request_start = Clock::now();
      }
      const bool had_head = c->parser.head_complete();
      const size_t used = c->parser.feed(c->pending_in);
      c->pending_in.erase(0, used);
      if (!had_head && c->parser.head_complete()) {
        c->head_done = Clock::now();
        if (c->parser.request().expects_continue && c->parser.state() == HttpRequestParser::State::kBody)
          c->send("HTTP/1.1 100 Continue\r\n\r\n");
      }
      switch (c->parser.state()) {
        case HttpRequestParser::State::kError:
          count(&HttpFrontStats::requests_malformed);
          fail_request(c, c->parser.error_status(), c->parser.error_message());
          return;
        case HttpRequestParser::State::kComplete: dispatch(c); return;
        default:
          if (used == 0) return;  // needs more bytes
      }
    }
  }

  void dispatch(const std::shared_ptr<Connection>& c) {
    ParsedRequest p = c->parser.take();
    c->parser.reset();
    c->reading_request = false;
    c->keep_alive = p.keep_alive;
    {
      std::lock_guard<std::mutex> lock(c->mu);
      c->phase = Phase::kBusy;
      c->update_interest_locked();
    }
    auto req = std::make_shared<HttpRequest>();
    req->method = std::move(p.method);
    req->path = std::move(p.path);
    req->query = std::move(p.query);
    req->headers = std::move(p.headers);
    req->body = std::move(p.body);
    req->remote_addr = c->addr;
    req->connection = c;
    WorkerPool& pool = hooks.is_light && hooks.is_light(*req) ? light_workers : workers;
    pool.post([this, c, req] { respond(c, *req); });
  }

  // Worker thread: runs the handler and writes its answer.
  void respond(const std::shared_ptr<Connection>& c, HttpRequest& req) {
    HttpResponse res;
    bool ok = true;
    bool head_sent = false;
    bool failed = false;  // a handler threw: answer 500 (if still possible) and close
    // Once the listener is closed every answer ends its connection.
    const bool keep_alive = c->keep_alive && !stopping.load() && !accept_closed.load();
    try {
      hooks.handle(req, res);
      if (res.stream) {
        ok = c->send(response_head(res, keep_alive, true));
        head_sent = true;
        ChunkedStream stream(*c);
        if (ok) ok = res.stream(stream);
        if (ok) ok = c->send("0\r\n\r\n");
      } else {
        ok = c->send(response_head(res, keep_alive, false) + res.body);
      }
    } catch (const std::exception& e) {
      // The handlers answer their own errors; this is a bug, and the client
      // still gets an answer (or, mid-stream, a dropped connection).
      failed = true;
      if (!head_sent) {
        res = hooks.error(500, std::string("internal error: ") + e.what());
        ok = c->send(response_head(res, false, false) + res.body);
      }
    }
    if (hooks.after) hooks.after(req, res, ok);
    req.connection.reset();
    {
      std::lock_guard<std::mutex> lock(done_mu);
      done.emplace_back(c, ok && keep_alive && !failed);
    }
    wake();
  }

  // Loop thread: a worker finished a response.
  void finish_responses() {
    std::vector<std::pair<std::shared_ptr<Connection>, bool>> batch;
    {
      std::lock_guard<std::mutex> lock(done_mu);
      batch.swap(done);
    }
    for (auto& [c, keep] : batch) {
      auto it = conns.find(c->fd);
      if (it == conns.end() || it->second != c) continue;  // closed already
      {
        std::lock_guard<std::mutex> lock(c->mu);
        if (c->broken.load()) keep = false;
        c->phase = keep ? Phase::kReading : Phase::kClosing;
        c->idle_since = Clock::now();
        c->update_interest_locked();
      }
      if (keep) {
        parse(c);  // a pipelined request may be waiting already
      } else {
        close_when_flushed(c);
      }
    }
  }

  void on_readable(const std::shared_ptr<Connection>& c) {
    char buf[kReadChunk];
    for (;;) {
      const ssize_t n = ::recv(c->fd, buf, sizeof(buf), 0);
      if (n > 0 && c->phase == Phase::kLingering) continue;  // discarded
      if (n > 0) {
        c->pending_in.append(buf, static_cast<size_t>(n));
        // Parse as bytes arrive, so a malformed head or an oversized
        // one is answered at once; never hold more than one read ahead.
        parse(c);
        if (c->phase != Phase::kReading) return;
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      close_conn(c);  // EOF or error
      return;
    }
  }

  void on_writable(const std::shared_ptr<Connection>& c) {
    bool close_now = false;
    {
      std::lock_guard<std::mutex> lock(c->mu);
      if (!c->flush_locked()) {
        c->mark_broken_locked();
        close_now = true;
      } else {
        c->drained.notify_all();
        if (c->out_off == c->out.size()) c->update_interest_locked();
      }
    }
    if (close_now) {
      close_conn(c);
    } else if (c->phase == Phase::kClosing) {
      close_when_flushed(c);
    }
  }

  void on_event(int fd, uint32_t events) {
    auto it = conns.find(fd);
    if (it == conns.end()) return;
    std::shared_ptr<Connection> c = it->second;
    if (events & EPOLLOUT) on_writable(c);
    if (!conns.count(fd)) return;
    if ((events & EPOLLIN) && (c->phase == Phase::kReading || c->phase == Phase::kLingering)) on_readable(c);
    if (!conns.count(fd)) return;
    // The peer closed or reset: nobody reads an answer any more. While a
    // handler runs this is how it learns the client left.
    if (events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) {
      if (c->phase != Phase::kBusy && (events & EPOLLIN)) return;  // read the rest first; EOF closes
      close_conn(c);
    }
  }

  void check_deadlines() {
    const auto now = Clock::now();
    std::vector<std::pair<std::shared_ptr<Connection>, int>> expired;  // 0: close silently, else the status
    for (auto& [fd, c] : conns) {
      {
        std::lock_guard<std::mutex> lock(c->mu);
        if (c->out_off < c->out.size() && now - c->last_progress > opt.write_timeout) {
          count(&HttpFrontStats::writes_timed_out);
          expired.emplace_back(c, 0);
          continue;
        }
      }
      if (c->phase == Phase::kLingering && now > c->linger_until) expired.emplace_back(c, 0);
      if (c->phase != Phase::kReading) continue;
      if (!c->reading_request) {
        // Idle connections outlive the listener (until their keep-alive
        // timeout or stop()): a request a client sends on one during the
        // drain is answered 503 with Connection: close (docs/api.md,
        // Shutdown), not met by a connection closed under it.
        if (now - c->idle_since > opt.keep_alive_timeout) expired.emplace_back(c, 0);
      } else if (!c->parser.head_complete()) {
        if (now - c->request_start > opt.header_timeout) expired.emplace_back(c, 408);
      } else if (now - c->head_done > opt.body_timeout) {
        expired.emplace_back(c, 408);
      }
    }
    for (auto& [c, status] : expired) {
      if (status == 0) {
        close_conn(c);
      } else {
        count(&HttpFrontStats::requests_timed_out);
        fail_request(c, status,
                     c->parser.head_complete()
                         ? fmt::format("the request body did not arrive within {} ms", opt.body_timeout.count())
                         : fmt::format("the request head did not arrive within {} ms", opt.header_timeout.count()));
      }
    }
  }

  bool output_pending() const {
    for (const auto& [fd, c] : conns) {
      std::lock_guard<std::mutex> lock(c->mu);
      if (!c->broken.load() && c->out_off < c->out.size()) return true;
    }
    return false;
  }

  void close_listener() {
    if (listen_fd < 0) return;
    epoll_ctl(epoll_fd, EPOLL_CTL_DEL, listen_fd, nullptr);
    ::close(listen_fd);
    listen_fd = -1;
    accept_closed.store(true);
  }

  void run() {
    std::vector<epoll_event> events(256);
    auto last_scan = Clock::now();
    // After stop(): the workers have ended; what they queued still goes
    // out (a stream's last chunks), for at most kStopFlush.
    while (!stopping.load() || (output_pending() && Clock::now() < stop_flush_deadline)) {
      const int n =
          epoll_wait(epoll_fd, events.data(), static_cast<int>(events.size()), static_cast<int>(kTick.count()));
      if (listener_close_requested.load()) close_listener();
      for (int i = 0; i < n; ++i) {
        const int fd = events[i].data.fd;
        if (fd == wake_fd) {
          uint64_t v;
          [[maybe_unused]] ssize_t r = ::read(wake_fd, &v, sizeof(v));
          finish_responses();
        } else if (fd == listen_fd) {
          accept_all();
        } else {
          on_event(fd, events[i].events);
        }
      }
      if (Clock::now() - last_scan >= kTick) {
        if (accept_paused && listen_fd >= 0) {
          epoll_event e{};
          e.events = EPOLLIN;
          e.data.fd = listen_fd;
          epoll_ctl(epoll_fd, EPOLL_CTL_ADD, listen_fd, &e);
          accept_paused = false;
        }
        check_deadlines();
        last_scan = Clock::now();
      }
    }
    std::vector<std::shared_ptr<Connection>> all;
    for (auto& [fd, c] : conns) all.push_back(c);
    for (auto& c : all) close_conn(c);
    close_listener();
  }
};

HttpFront::HttpFront(HttpFrontOptions options, HttpFrontHooks hooks)
    : impl_(std::make_unique<Impl>(std::move(options), std::move(hooks))) {}

HttpFront::~HttpFront() { stop(); }

int HttpFront::bind() {
  Impl& m = *impl_;
  const int port = m.bind_listener();
  m.epoll_fd = epoll_create1(EPOLL_CLOEXEC);
  m.wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (m.epoll_fd < 0 || m.wake_fd < 0) fail("cannot create the event loop: {}", std::strerror(errno));
  for (int fd : {m.listen_fd, m.wake_fd}) {
    epoll_event e{};
    e.events = EPOLLIN;
    e.data.fd = fd;
    epoll_ctl(m.epoll_fd, EPOLL_CTL_ADD, fd, &e);
  }
  return port;
}

void HttpFront::start() {
  impl_->loop_thread = std::thread([this] { impl_->run(); });
}

void HttpFront::stop_accepting() {
  impl_->listener_close_requested.store(true);
  impl_->wake();
  // Once this returns, nobody can connect any more.
  while (impl_->loop_thread.joinable() && !impl_->accept_closed.load() && !impl_->stopping.load())
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

void HttpFront::stop() {
  Impl& m = *impl_;
  if (m.loop_thread.joinable()) stop_accepting();
  // The handlers end first (their last words reach the connections), then
  // the loop flushes and closes everything.
  m.workers.stop();
  m.light_workers.stop();
  m.stop_flush_deadline = Clock::now() + kStopFlush;
  m.stopping.store(true);
  if (m.wake_fd >= 0) m.wake();
  if (m.loop_thread.joinable()) m.loop_thread.join();
  if (m.listen_fd >= 0) {
    ::close(m.listen_fd);
    m.listen_fd = -1;
  }
  for (int* fd : {&m.epoll_fd, &m.wake_fd}) {
    if (*fd >= 0) ::close(*fd);
    *fd = -1;
  }
}

HttpFrontStats HttpFront::stats() const {
  std::lock_guard<std::mutex> lock(impl_->stats_mu);
  HttpFrontStats s = impl_->st;
  s.workers = impl_->workers.size();
  return s;
}

}  // namespace tokenmill::http
