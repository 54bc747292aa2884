// Numbers in the benchmark's JSON files: JSON has no NaN or infinity, so a
// figure that could not be measured (no successes, no tokens) is null.
#pragma once

#include <cmath>

#include <nlohmann/json.hpp>

namespace tokenmill::bench {

inline nlohmann::json number_or_null(double v) {
  return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr);
}

}  // namespace tokenmill::bench
