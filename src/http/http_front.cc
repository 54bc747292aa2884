// The public HttpFront (http_front.h) and the listener side of its Impl:
// binding, accepting or refusing connections, and closing them. The rest
// of Impl: http_front_requests.cc (requests and responses) and
// http_front_loop.cc (the event loop).
#include "http/http_front.h"

#include <fmt/format.h>

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include "http/http_front_impl.h"
#include "util/error.h"

namespace tokenmill::http {

HttpFront::Impl::Impl(HttpFrontOptions o, HttpFrontHooks h)
    : opt(std::move(o)), hooks(std::move(h)), workers(opt.worker_threads), light_workers(opt.light_threads) {}

void HttpFront::Impl::count(int64_t HttpFrontStats::*field, int64_t delta) {
  std::lock_guard<std::mutex> lock(stats_mu);
  st.*field += delta;
}

void HttpFront::Impl::wake() {
  const uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(wake_fd, &one, sizeof(one));
}

int HttpFront::Impl::bind_listener() {
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

std::string HttpFront::Impl::peer_address(const sockaddr_storage& ss) {
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
void HttpFront::Impl::refuse(int fd, int status, const std::string& message) {
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

void HttpFront::Impl::accept_all() {
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

void HttpFront::Impl::close_conn(const std::shared_ptr<Connection>& c) {
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
void HttpFront::Impl::linger(const std::shared_ptr<Connection>& c) {
  ::shutdown(c->fd, SHUT_WR);
  std::lock_guard<std::mutex> lock(c->mu);
  c->phase = Phase::kLingering;
  c->linger_until = Clock::now() + kLinger;
  c->update_interest_locked();
}

// After the last response was queued (kClosing): linger once it is all
// out, close at once if the connection broke; else EPOLLOUT goes on.
void HttpFront::Impl::close_when_flushed(const std::shared_ptr<Connection>& c) {
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

void HttpFront::Impl::close_listener() {
  if (listen_fd < 0) return;
  epoll_ctl(epoll_fd, EPOLL_CTL_DEL, listen_fd, nullptr);
  ::close(listen_fd);
  listen_fd = -1;
  accept_closed.store(true);
}

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
