// Sizing the paged KV cache from a memory budget.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace tokenmill::engine {

// MemAvailable from /proc/meminfo in bytes; nullopt when it cannot be read
// (not Linux, or a kernel older than 3.14).
std::optional<int64_t> mem_available_bytes();

// Parses the text of /proc/meminfo; nullopt when MemAvailable is missing.
std::optional<int64_t> parse_mem_available(std::string_view meminfo);

// Parses a byte size: "1073741824", "512M", "512MiB", "4G", "1.5GB" (K/M/G/T
// are binary multiples, case-insensitive). Throws Error naming the text.
int64_t parse_byte_size(std::string_view text);

}  // namespace tokenmill::engine
