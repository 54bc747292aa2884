// The router's log: one JSON object per line on stderr ({"event": ...}),
// the same shape as `tokenmill serve` writes, so one tool reads both.
// Thread-safe: lines from different threads never interleave.
#pragma once

#include <nlohmann/json.hpp>

namespace tokenmill::router {

void log_event(const nlohmann::json& event);

}  // namespace tokenmill::router
