// HttpFront::Impl's event loop: epoll events on the connections, the
// wake-up from workers, the listener, and the deadline scan every tick.
#include "http/http_front_impl.h"

#include <fmt/format.h>

#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

namespace tokenmill::http {

void HttpFront::Impl::on_readable(const std::shared_ptr<Connection>& c) {
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

void HttpFront::Impl::on_writable(const std::shared_ptr<Connection>& c) {
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

void HttpFront::Impl::on_event(int fd, uint32_t events) {
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

void HttpFront::Impl::check_deadlines() {
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

bool HttpFront::Impl::output_pending() const {
  for (const auto& [fd, c] : conns) {
    std::lock_guard<std::mutex> lock(c->mu);
    if (!c->broken.load() && c->out_off < c->out.size()) return true;
  }
  return false;
}

void HttpFront::Impl::run() {
  std::vector<epoll_event> events(256);
  auto last_scan = Clock::now();
  // After stop(): the workers have ended; what they queued still goes
  // out (a stream's last chunks), for at most kStopFlush.
  while (!stopping.load() || (output_pending() && Clock::now() < stop_flush_deadline)) {
    const int n = epoll_wait(epoll_fd, events.data(), static_cast<int>(events.size()), static_cast<int>(kTick.count()));
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

}  // namespace tokenmill::http
