#include "bench/server_monitor.h"

#include <httplib.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "bench/driver.h"

namespace tokenmill::bench {

std::map<std::string, double> parse_prometheus_text(const std::string& text) {
  std::map<std::string, double> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    size_t name_end = line.find_first_of("{ \t");
    if (name_end == std::string::npos || name_end == 0) continue;
    const std::string name = line.substr(0, name_end);
    size_t value_start = name_end;
    if (line[name_end] == '{') {
      // Label values may hold '}' inside quotes.
      bool quoted = false;
      size_t i = name_end + 1;
      for (; i < line.size(); ++i) {
        if (line[i] == '\\' && quoted)
          ++i;
        else if (line[i] == '"')
          quoted = !quoted;
        else if (line[i] == '}' && !quoted)
          break;
      }
      if (i >= line.size()) continue;
      value_start = i + 1;
    }
    const char* begin = line.c_str() + value_start;
    char* end = nullptr;
    const double v = std::strtod(begin, &end);
    if (end == begin || !std::isfinite(v)) continue;
    out[name] += v;
  }
  return out;
}

std::optional<double> first_metric(const std::map<std::string, double>& metrics,
                                   const std::vector<std::string>& names) {
  for (const std::string& n : names) {
    const auto it = metrics.find(n);
    if (it != metrics.end()) return it->second;
  }
  return std::nullopt;
}

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

std::optional<std::map<std::string, double>> ServerMonitor::scrape() const {
  httplib::Client client(origin_);
  client.set_connection_timeout(2, 0);
  client.set_read_timeout(5, 0);
  const httplib::Result res = client.Get(path_);
  if (!res || res->status != 200) return std::nullopt;
  return parse_prometheus_text(res->body);
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
      const auto it = metrics->find(n);
      if (it == metrics->end()) continue;
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
      const auto a = first_metric(*at_begin_, names), b = first_metric(*metrics, names);
      return a && b ? *b - *a : -1.0;
    };
    out.prefix_hit_tokens = delta(names_.prefix_hit_tokens);
    out.prefix_miss_tokens = delta(names_.prefix_miss_tokens);
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
