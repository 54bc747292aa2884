#include "http/http_connection.h"

#include <fmt/format.h>

#include <linux/sockios.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>

#include "http/http_status.h"

namespace tokenmill::http {

Connection::~Connection() {
  if (fd >= 0) ::close(fd);
}

void Connection::update_interest_locked() {
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

bool Connection::flush_locked() {
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

bool Connection::send(std::string_view data) {
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

size_t Connection::unsent_locked() const {
  int queued = 0;  // the kernel's send queue: written but not acknowledged
  if (ioctl(fd, SIOCOUTQ, &queued) != 0) queued = 0;
  return out.size() - out_off + static_cast<size_t>(std::max(queued, 0));
}

void Connection::mark_broken_locked() {
  broken.store(true);
  drained.notify_all();
}

bool ChunkedStream::write(std::string_view data) {
  if (data.empty()) return !c_.broken.load();
  return c_.send(fmt::format("{:x}\r\n{}\r\n", data.size(), data));
}

size_t ChunkedStream::unsent_bytes() const {
  std::lock_guard<std::mutex> lock(c_.mu);
  return c_.unsent_locked();
}

bool ChunkedStream::wait_unsent_below(size_t bytes, std::chrono::milliseconds timeout) {
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

}  // namespace tokenmill::http
