#include "bench/server_monitor.h"

#include <httplib.h>

#include <chrono>
#include <fstream>

#include "bench/driver.h"

namespace tokenmill::bench {

std::optional<ProcessMemory> read_process_memory(int64_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  if (!in) return std::nullopt;
  ProcessMemory m;
  bool found = false;
  std::string key;
  while (in >> key) {
    double kib = 0;
    if (key == "VmRSS:" && in >> kib) {
      m.rss_bytes = kib * 1024;
      found = true;
    } else if (key == "VmHWM:" && in >> kib) {
      m.hwm_bytes = kib * 1024;
    }
    in.ignore(1 << 20, '\n');
  }
  if (!found) return std::nullopt;
  return m;
}

ServerMonitor::ServerMonitor(const std::string& url, const ServerMetricNames& names, double interval_s, int64_t pid)
    : names_(names), interval_s_(interval_s), pid_(pid) {
  const HttpTarget t = parse_target_url(url);
  origin_ = t.origin;
  path_ = t.prefix + "/metrics";
  if (interval_s_ > 0) {
    thread_ = std::thread([this] {
      const auto step = std::chrono::duration<double>(interval_s_);
      auto next = std::chrono::steady_clock::now();
      while (!stop_.load()) {
        sample();
        next += std::chrono::duration_cast<std::chrono::steady_clock::duration>(step);
        while (!stop_.load() && std::chrono::steady_clock::now() < next) {
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
      }
    });
  }
}

ServerMonitor::~ServerMonitor() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
}

std::optional<ServerMonitor::Snapshot> ServerMonitor::scrape() const {
  httplib::Client client(origin_);
  client.set_connection_timeout(2, 0);
  client.set_read_timeout(5, 0);
  const httplib::Result res = client.Get(path_);
  if (!res || res->status != 200) return std::nullopt;
  const std::vector<PrometheusSample> samples = parse_prometheus_samples(res->body);
  Snapshot s;
  for (const PrometheusSample& x : samples) s.by_name[x.name] += x.value;
  s.step_phases = read_step_phases(samples);
  return s;
}

void ServerMonitor::sample() {
  const auto metrics = scrape();
  double rss = -1;
  if (pid_ > 0) {
    if (const std::optional<ProcessMemory> m = read_process_memory(pid_)) rss = m->rss_bytes;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  if (metrics) {
    current_.metrics_available = true;
    for (const std::string& n : names_.memory_bytes) {
      const auto it = metrics->by_name.find(n);
      if (it == metrics->by_name.end()) continue;
      if (it->second > current_.memory_high_water_bytes) {
        current_.memory_high_water_bytes = it->second;
        current_.memory_source = "metrics:" + n;
      }
      break;
    }
  }
  if (rss > current_.memory_high_water_bytes) {
    current_.memory_high_water_bytes = rss;
    current_.memory_source = "proc:" + std::to_string(pid_);
  }
}

void ServerMonitor::begin_cell() {
  auto metrics = scrape();
  std::lock_guard<std::mutex> lock(mutex_);
  current_ = ServerCellStats{};
  at_begin_ = std::move(metrics);
}

ServerCellStats ServerMonitor::end_cell() {
  sample();
  const auto metrics = scrape();
  std::lock_guard<std::mutex> lock(mutex_);
  ServerCellStats out = current_;
  if (metrics && at_begin_) {
    auto delta = [&](const std::vector<std::string>& names) {
      const auto a = first_metric(at_begin_->by_name, names), b = first_metric(metrics->by_name, names);
      return a && b ? *b - *a : -1.0;
    };
    out.prefix_hit_tokens = delta(names_.prefix_hit_tokens);
    out.prefix_miss_tokens = delta(names_.prefix_miss_tokens);
    if (metrics->step_phases) out.step_phases = step_phase_delta(at_begin_->step_phases, *metrics->step_phases);
  }
  return out;
}

std::optional<double> ServerMonitor::lifetime_peak_rss() const {
  if (pid_ <= 0) return std::nullopt;
  const auto m = read_process_memory(pid_);
  if (!m) return std::nullopt;
  return m->hwm_bytes;
}

}  // namespace tokenmill::bench
