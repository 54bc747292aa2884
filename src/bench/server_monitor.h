// Watches the server while a benchmark runs: its Prometheus /metrics
// (memory, prefix-cache counters, the engine's step phases) sampled on a
// background thread, and, when the server's pid is given, its resident
// memory from /proc (same host).
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "bench/prometheus_text.h"
#include "bench/step_phases.h"
#include "bench/traffic_spec.h"

namespace tokenmill::bench {

// Resident set size (VmRSS) and its peak (VmHWM) of a process, in bytes.
struct ProcessMemory {
  double rss_bytes = 0;
  double hwm_bytes = 0;
};
std::optional<ProcessMemory> read_process_memory(int64_t pid);

// What the monitor saw during one cell.
struct ServerCellStats {
  bool metrics_available = false;
  double memory_high_water_bytes = -1;  // max sample; -1: not seen
  std::string memory_source;            // "metrics:<name>", "proc:<pid>" or ""
  double prefix_hit_tokens = -1;        // counter deltas over the cell; -1: not exported
  double prefix_miss_tokens = -1;
  std::optional<StepPhaseCounters> step_phases;  // counter deltas over the cell; nullopt: not exported
};

class ServerMonitor {
 public:
  // interval_s == 0: scrape only at cell boundaries. pid <= 0: no /proc.
  ServerMonitor(const std::string& url, const ServerMetricNames& names, double interval_s, int64_t pid);
  ~ServerMonitor();
  ServerMonitor(const ServerMonitor&) = delete;
  ServerMonitor& operator=(const ServerMonitor&) = delete;

  void begin_cell();
  ServerCellStats end_cell();
  // The server process's peak RSS over its lifetime (VmHWM), if a pid was given.
  std::optional<double> lifetime_peak_rss() const;

 private:
  // One /metrics answer, in both views.
  struct Snapshot {
    std::map<std::string, double> by_name;
    std::optional<StepPhaseCounters> step_phases;
  };
  std::optional<Snapshot> scrape() const;
  void sample();  // one scrape + /proc read folded into the current cell

  std::string origin_, path_;
  ServerMetricNames names_;
  double interval_s_;
  int64_t pid_;
  mutable std::mutex mutex_;
  ServerCellStats current_;
  std::optional<Snapshot> at_begin_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace tokenmill::bench
