#include "engine/memory_budget.h"

#include <cctype>
#include <cmath>
#include <fstream>
#include <sstream>
#include <string>

#include "util/error.h"

namespace tokenmill::engine {

std::optional<int64_t> parse_mem_available(std::string_view meminfo) {
  std::istringstream in{std::string(meminfo)};
  std::string line;
  while (std::getline(in, line)) {
    constexpr std::string_view kKey = "MemAvailable:";
    if (line.rfind(kKey, 0) != 0) continue;
    std::istringstream fields(line.substr(kKey.size()));
    int64_t value = 0;
    std::string unit;
    if (!(fields >> value) || value < 0) return std::nullopt;
    fields >> unit;
    return unit == "kB" ? value * 1024 : value;
  }
  return std::nullopt;
}

std::optional<int64_t> mem_available_bytes() {
  std::ifstream in("/proc/meminfo");
  if (!in) return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  return parse_mem_available(text.str());
}

int64_t parse_byte_size(std::string_view text) {
  const std::string s(text);
  size_t used = 0;
  double value = 0;
  try {
    value = std::stod(s, &used);
  } catch (const std::exception&) {
    fail("'{}' is not a byte size (examples: 1073741824, 512M, 4G)", text);
  }
  std::string unit;
  for (size_t i = used; i < s.size(); ++i) {
    if (!std::isspace(static_cast<unsigned char>(s[i]))) unit += static_cast<char>(std::toupper(s[i]));
  }
  double mult = 1;
  if (unit.empty() || unit == "B") {
    mult = 1;
  } else if (unit == "K" || unit == "KB" || unit == "KIB") {
    mult = 1024.0;
  } else if (unit == "M" || unit == "MB" || unit == "MIB") {
    mult = 1024.0 * 1024;
  } else if (unit == "G" || unit == "GB" || unit == "GIB") {
    mult = 1024.0 * 1024 * 1024;
  } else if (unit == "T" || unit == "TB" || unit == "TIB") {
    mult = 1024.0 * 1024 * 1024 * 1024;
  } else {
    fail("'{}': unknown size unit '{}' (use K, M, G or T)", text, unit);
  }
  const double bytes = value * mult;
  if (!std::isfinite(bytes) || bytes < 0 || bytes > 9.0e18) fail("'{}' is not a valid byte size", text);
  return static_cast<int64_t>(bytes);
}

}  // namespace tokenmill::engine
