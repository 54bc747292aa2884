// Per-tenant limits: how much of the engine one tenant (GenerateRequest::
// tenant; the empty string is a tenant of its own) may hold at once. The
// scheduler enforces them (see POLICY in scheduler.h); 0 means no limit.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

namespace tokenmill::sched {

struct TenantLimits {
  // Sequence slots running at once (parallel samples count one each, as
  // for max_seqs). A tenant at its limit starts nothing more; its waiting
  // requests are passed over without holding back other tenants'.
  int64_t max_running = 0;
  // Waiting requests that could not start now (the bound counts, as the
  // global max_waiting does, only those beyond the tenant's free running
  // slots). Arrivals beyond it are refused with kQueueFull.
  int64_t max_waiting = 0;
  // Prefix-cache blocks the tenant published that are still indexed
  // (referenced or evictable). Publishing beyond it drops the tenant's own
  // least recently used evictable block first, else does not publish.
  int64_t max_prefix_blocks = 0;

  bool operator==(const TenantLimits&) const = default;
  // Throws Error naming `where`.field when a limit is negative.
  void validate(std::string_view where) const;
};

// The limits of every tenant: its own entry, else the default (which
// applies to each unlisted tenant separately).
struct TenantPolicy {
  std::map<std::string, TenantLimits> tenants;
  TenantLimits defaults;

  const TenantLimits& of(const std::string& tenant) const {
    const auto it = tenants.find(tenant);
    return it == tenants.end() ? defaults : it->second;
  }
  // Whether any tenant has a running limit (else the scheduler skips the
  // per-tenant counting).
  bool limits_running() const;
  // Throws Error naming the first negative field, as
  // tenants_name["acme"].max_running or defaults_name.max_waiting.
  void validate(std::string_view tenants_name, std::string_view defaults_name) const;
};

// The prefix cache's owner key of a tenant (kv::PublishQuota::owner).
uint64_t tenant_key(std::string_view tenant);

}  // namespace tokenmill::sched
