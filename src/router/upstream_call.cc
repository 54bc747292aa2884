#include "router/upstream_call.h"

namespace tokenmill::router {

UpstreamCall::UpstreamCall(const ReplicaAddress& to, UpstreamRequest request)
    : client_(to.host, to.port), max_buffered_(request.max_buffered) {
  client_.set_connection_timeout(std::chrono::duration_cast<std::chrono::microseconds>(request.connect_timeout));
  client_.set_read_timeout(std::chrono::duration_cast<std::chrono::microseconds>(request.read_timeout));
  client_.set_write_timeout(std::chrono::duration_cast<std::chrono::microseconds>(request.read_timeout));
  client_.set_keep_alive(false);
  client_.set_tcp_nodelay(true);  // a token chunk should leave at once, both ways
  thread_ = std::thread([this, r = std::move(request)]() mutable { run(std::move(r)); });
}

UpstreamCall::~UpstreamCall() {
  cancel();
  thread_.join();
}

void UpstreamCall::run(UpstreamRequest request) {
  httplib::Request req;
  req.method = request.method;
  req.path = request.path;
  req.headers = std::move(request.headers);
  req.body = std::move(request.body);
  req.response_handler = [this](const httplib::Response& res) {
    std::lock_guard<std::mutex> lock(mutex_);
    head_.status = res.status;
    head_.content_type = res.get_header_value("Content-Type");
    head_.headers = res.headers;
    changed_.notify_all();
    return !cancelled_;
  };
  req.content_receiver = [this](const char* data, size_t n, uint64_t, uint64_t) { return on_piece(data, n); };
  httplib::Response res;
  httplib::Error err = httplib::Error::Success;
  bool ok = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (cancelled_) err = httplib::Error::Canceled;
  }
  if (err == httplib::Error::Success) ok = client_.send(req, res, err);
  std::lock_guard<std::mutex> lock(mutex_);
  finished_ = true;
  succeeded_ = ok && !cancelled_;
  error_ = cancelled_ ? httplib::Error::Canceled : err;
  if (ok && head_.status < 0) head_.status = res.status;
  changed_.notify_all();
}

bool UpstreamCall::on_piece(const char* data, size_t n) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (max_buffered_ > 0) changed_.wait(lock, [this] { return cancelled_ || buffered_ < max_buffered_; });
  if (cancelled_) return false;
  pieces_.emplace_back(data, n);
  buffered_ += n;
  changed_.notify_all();
  return true;
}

bool UpstreamCall::wait(bool whole, const std::function<bool()>& keep_waiting) {
  std::unique_lock<std::mutex> lock(mutex_);
  const auto ready = [&] { return finished_ || (!whole && head_.status == 200 && !pieces_.empty()); };
  while (!ready()) {
    if (changed_.wait_for(lock, std::chrono::milliseconds(100), ready)) break;
    lock.unlock();
    const bool keep = keep_waiting();
    lock.lock();
    if (!keep) {
      lock.unlock();
      cancel();
      return false;
    }
  }
  return true;
}

bool UpstreamCall::next_piece(std::string& out, std::chrono::milliseconds wait) {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait_for(lock, wait, [this] { return finished_ || !pieces_.empty(); });
  if (pieces_.empty()) return false;
  out = std::move(pieces_.front());
  pieces_.pop_front();
  buffered_ -= out.size();
  changed_.notify_all();  // a reader blocked on max_buffered may go on
  return true;
}

std::string UpstreamCall::take_all() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::string all;
  all.reserve(buffered_);
  for (const std::string& p : pieces_) all += p;
  pieces_.clear();
  buffered_ = 0;
  changed_.notify_all();
  return all;
}

UpstreamHead UpstreamCall::head() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return head_;
}

bool UpstreamCall::finished() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return finished_;
}

bool UpstreamCall::succeeded() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return succeeded_;
}

std::string UpstreamCall::error() const {
  std::lock_guard<std::mutex> lock(mutex_);
  switch (error_) {
    case httplib::Error::Success: return "";
    case httplib::Error::Connection: return "cannot connect (refused or unreachable)";
    case httplib::Error::ConnectionTimeout: return "connect timed out";
    case httplib::Error::Read: return "connection lost or timed out while reading the answer";
    case httplib::Error::Write: return "connection lost while sending the request";
    case httplib::Error::Canceled: return "cancelled";
    default: return "transport error: " + httplib::to_string(error_);
  }
}

bool UpstreamCall::connect_failed() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return error_ == httplib::Error::Connection || error_ == httplib::Error::ConnectionTimeout;
}

void UpstreamCall::cancel() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (cancelled_ || finished_) return;
    cancelled_ = true;
    changed_.notify_all();
  }
  // Interrupts a read blocked in the socket (the thread-safe way httplib
  // offers); the receiver's false answer covers a call not yet connected.
  client_.stop();
}

}  // namespace tokenmill::router
