// The Prometheus text exposition format (version 0.0.4) for GET /metrics:
// engine histograms (seconds), counters and gauges plus the HTTP layer's
// counters. Metric names are listed in docs/api.md.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engine/metrics.h"
#include "server/http_types.h"
#include "server/lora_registry.h"

namespace tokenmill::server {

// Builds one exposition text; each family gets its # HELP and # TYPE line
// once, followed by its samples.
class PrometheusWriter {
 public:
  void counter(std::string_view name, std::string_view help, double value);
  void gauge(std::string_view name, std::string_view help, double value);
  // A family with labelled samples: labels are `key="value",...` strings
  // already escaped (see prometheus_label).
  void family(std::string_view name, std::string_view type, std::string_view help);
  void sample(std::string_view name, std::string_view labels, double value);
  // Histogram from an engine Histogram in milliseconds, exported in seconds
  // with cumulative `le` buckets, _sum and _count.
  void histogram_ms(std::string_view name, std::string_view help, const engine::Histogram& h) {
    histogram(name, help, h, 1e-3);
  }
  // The same in the histogram's own unit times `scale`.
  void histogram(std::string_view name, std::string_view help, const engine::Histogram& h, double scale = 1.0);

  const std::string& text() const { return text_; }

 private:
  std::string text_;
};

// `key="value"` with the value escaped (backslash, quote, newline).
std::string prometheus_label(std::string_view key, std::string_view value);

// A number as Prometheus writes it: shortest round-trip form, "+Inf",
// "-Inf", "NaN".
std::string prometheus_number(double v);

// The process's memory from /proc/self/status (bytes); zeros when unreadable.
struct ProcessMemory {
  int64_t resident = 0;             // VmRSS
  int64_t resident_high_water = 0;  // VmHWM
};
ProcessMemory read_process_memory();
// Parses the text of /proc/<pid>/status.
ProcessMemory parse_process_status(std::string_view status);

// Folds m.prefix_by_tenant into one entry labelled kAllTenants (what a
// scrape without an admin key sees: no tenant's name or usage).
void fold_tenants(engine::MetricsSnapshot& m);
inline constexpr std::string_view kAllTenants = "_all";

std::string render_metrics(const engine::MetricsSnapshot& m, const HttpStatsSnapshot& http, std::string_view state,
                           const ProcessMemory& memory, const LoraServingStats& lora = {});

}  // namespace tokenmill::server
