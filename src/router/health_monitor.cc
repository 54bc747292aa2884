#include "router/health_monitor.h"

#include <httplib.h>

#include <charconv>
#include <cmath>

namespace tokenmill::router {

bool health_says_up(int status, std::string_view body) {
  if (status == 200) return true;
  if (status != 503) return false;
  const nlohmann::json j = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  return j.is_object() && j.value("status", "") == "overloaded";
}

std::optional<double> metric_value(std::string_view text, std::string_view name) {
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    if (line.size() <= name.size() || line.substr(0, name.size()) != name || line[name.size()] != ' ') continue;
    std::string_view value = line.substr(name.size() + 1);
    const size_t space = value.find(' ');  // an optional timestamp follows
    value = value.substr(0, space);
    double v = 0;
    const auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
    if (ec != std::errc() || ptr != value.data() + value.size() || !std::isfinite(v)) return std::nullopt;
    return v;
  }
  return std::nullopt;
}

HealthMonitor::HealthMonitor(Balancer& balancer, HealthOptions options) : balancer_(balancer), options_(options) {}

HealthMonitor::~HealthMonitor() { stop(); }

void HealthMonitor::poll(size_t i) {
  Replica& r = balancer_.replica(i);
  httplib::Client client(r.address.host, r.address.port);
  const auto t = options_.timeout;
  client.set_connection_timeout(std::chrono::duration_cast<std::chrono::microseconds>(t));
  client.set_read_timeout(std::chrono::duration_cast<std::chrono::microseconds>(t));
  client.set_keep_alive(false);
  const httplib::Result health = client.Get("/health");
  const bool up = health && health_says_up(health->status, health->body);
  std::string reason;
  if (!health) {
    reason = "health check: " + httplib::to_string(health.error());
  } else {
    reason = "health check: HTTP " + std::to_string(health->status) + " " + health->body.substr(0, 200);
  }
  balancer_.set_up(i, up, reason);
  if (!up) return;
  if (const httplib::Result m = client.Get("/metrics"); m && m->status == 200) {
    if (const std::optional<double> w = metric_value(m->body, "tokenmill_requests_waiting"))
      r.waiting.store(static_cast<int64_t>(std::llround(*w)));
  }
}

void HealthMonitor::poll_all_once() {
  std::vector<std::thread> checks;
  for (size_t i = 0; i < balancer_.size(); ++i) checks.emplace_back([this, i] { poll(i); });
  for (std::thread& t : checks) t.join();
}

void HealthMonitor::loop(size_t i) {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    lock.unlock();
    poll(i);
    lock.lock();
    wake_.wait_for(lock, options_.poll_interval, [this] { return stopping_; });
  }
}

void HealthMonitor::start() {
  for (size_t i = 0; i < balancer_.size(); ++i) threads_.emplace_back([this, i] { loop(i); });
}

void HealthMonitor::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (std::thread& t : threads_)
    if (t.joinable()) t.join();
  threads_.clear();
}

}  // namespace tokenmill::router
