// GET /console/api/status: what the console's dashboard draws, as one JSON
// object read every second (docs/console.md lists the fields). Counters are
// cumulative and histograms are the engine's (non-cumulative buckets), so
// the page turns two readings into rates and windowed percentiles; the
// server keeps nothing per viewer.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/metrics.h"
#include "server/admin/prometheus.h"
#include "server/http_types.h"

namespace tokenmill::console {

struct StatusInputs {
  std::string state;                              // HttpServer::state_name()
  std::optional<engine::MetricsSnapshot> engine;  // nullopt while loading
  server::HttpStatsSnapshot http;
  server::ProcessMemory memory;
  nlohmann::json server;  // the configuration (serve's "ready" event); null while loading
  double now_s = 0;       // Unix seconds of this reading
  double started_s = 0;   // Unix seconds the server started
};

nlohmann::json status_json(const StatusInputs& in);

// {"bounds": [...], "counts": [...], "count": n, "sum": s}: counts has one
// more entry than bounds (the overflow bucket).
nlohmann::json histogram_json(const engine::Histogram& h);

}  // namespace tokenmill::console
