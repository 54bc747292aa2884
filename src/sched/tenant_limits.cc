#include "sched/tenant_limits.h"

#include <fmt/format.h>

#include <functional>

#include "util/error.h"

namespace tokenmill::sched {

void TenantLimits::validate(std::string_view where) const {
  if (max_running < 0) fail("{}.max_running must be >= 0, got {}", where, max_running);
  if (max_waiting < 0) fail("{}.max_waiting must be >= 0, got {}", where, max_waiting);
  if (max_prefix_blocks < 0) fail("{}.max_prefix_blocks must be >= 0, got {}", where, max_prefix_blocks);
}

bool TenantPolicy::limits_running() const {
  if (defaults.max_running > 0) return true;
  for (const auto& [name, limits] : tenants) {
    if (limits.max_running > 0) return true;
  }
  return false;
}

void TenantPolicy::validate(std::string_view tenants_name, std::string_view defaults_name) const {
  for (const auto& [name, limits] : tenants) limits.validate(fmt::format("{}[\"{}\"]", tenants_name, name));
  defaults.validate(defaults_name);
}

uint64_t tenant_key(std::string_view tenant) { return std::hash<std::string_view>{}(tenant); }

}  // namespace tokenmill::sched
