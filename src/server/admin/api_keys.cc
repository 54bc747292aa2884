#include "server/admin/api_keys.h"

#include <fmt/format.h>
#define XXH_INLINE_ALL
#include <xxhash.h>

#include <fstream>
#include <map>
#include <sstream>

#include "server/api_error.h"
#include "util/error.h"

namespace tokenmill::server {

namespace {

bool valid_tenant(std::string_view t) {
  if (t.empty() || t.size() > 256) return false;
  for (unsigned char c : t)
    if (c < 0x20 || c == 0x7f) return false;
  return true;
}

// Compares every byte of both strings whatever they hold.
bool same_key(std::string_view a, std::string_view b) {
  unsigned diff = static_cast<unsigned>(a.size() ^ b.size());
  for (size_t i = 0; i < b.size(); ++i) diff |= static_cast<unsigned char>(b[i]) ^ (i < a.size() ? a[i] : 0);
  return diff == 0;
}

}  // namespace

void check_tenant_name(std::string_view tenant, std::string_view what) {
  if (!valid_tenant(tenant))
    fail("{}: a tenant name must be 1 to 256 bytes without control characters, got '{}'", what, tenant);
}

std::string tenant_for_key(std::string_view key) {
  return fmt::format("key-{:012x}", XXH3_64bits(key.data(), key.size()) >> 16);
}

ApiKey parse_api_key(std::string_view spec, bool trusted, bool admin) {
  ApiKey k;
  k.trusted = trusted;
  k.admin = admin;
  const size_t colon = spec.rfind(':');
  k.key = std::string(colon == std::string_view::npos ? spec : spec.substr(0, colon));
  if (k.key.empty()) fail("--api-key: the key must not be empty (KEY or KEY:TENANT)");
  if (colon != std::string_view::npos) {
    k.tenant = std::string(spec.substr(colon + 1));
    check_tenant_name(k.tenant, "--api-key");
  } else {
    k.tenant = tenant_for_key(k.key);
  }
  return k;
}

std::vector<ApiKey> load_api_key_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) fail("--api-key-file: cannot read {}", path);
  std::vector<ApiKey> keys;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (const size_t hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    std::istringstream words(line);
    std::vector<std::string> w;
    for (std::string x; words >> x;) w.push_back(x);
    if (w.empty()) continue;
    ApiKey k;
    for (size_t i = 2; i < w.size(); ++i) {
      bool& mark = w[i] == "trusted" ? k.trusted : k.admin;
      if ((w[i] != "trusted" && w[i] != "admin") || mark)
        fail("{}:{}: expected 'KEY [TENANT] [trusted] [admin]', got '{}'", path, n, line);
      mark = true;
    }
    k.key = w[0];
    k.tenant = w.size() >= 2 ? w[1] : tenant_for_key(k.key);
    check_tenant_name(k.tenant, fmt::format("{}:{}", path, n));
    keys.push_back(std::move(k));
  }
  return keys;
}

ApiKeyTable::ApiKeyTable(std::vector<ApiKey> keys) : keys_(std::move(keys)) {
  std::map<std::string, const ApiKey*> seen;
  for (const ApiKey& k : keys_) {
    auto [it, fresh] = seen.emplace(k.key, &k);
    if (!fresh && (it->second->tenant != k.tenant || it->second->trusted != k.trusted || it->second->admin != k.admin))
      fail("API key '{}...' is listed twice with different tenants or marks", k.key.substr(0, 4));
  }
}

const ApiKey* ApiKeyTable::find(std::string_view authorization) const {
  constexpr std::string_view kBearer = "Bearer ";
  if (authorization.substr(0, kBearer.size()) != kBearer) return nullptr;
  const std::string_view key = authorization.substr(kBearer.size());
  const ApiKey* found = nullptr;
  for (const ApiKey& k : keys_)
    if (same_key(k.key, key) && !found) found = &k;
  return found;
}

std::string resolve_tenant(const ApiKey* key, bool auth_enabled, const std::string& x_tenant) {
  if (!x_tenant.empty() && !valid_tenant(x_tenant))
    bad_request("X-Tenant", "the X-Tenant header must be at most 256 bytes without control characters");
  if (!auth_enabled) return x_tenant;
  if (x_tenant.empty() || x_tenant == key->tenant) return key->tenant;
  if (key->trusted) return x_tenant;
  throw ApiError(403,
                 "this API key may not choose its tenant (X-Tenant); only keys marked trusted may "
                 "(--trusted-api-key, or 'trusted' in the key file)",
                 "permission_error", std::string("X-Tenant"), "tenant_not_allowed");
}

}  // namespace tokenmill::server
