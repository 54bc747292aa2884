// API keys and the tenants they stand for. A key names its tenant
// (`--api-key KEY:TENANT`, or a key file); a key without one is a tenant
// of its own, named from a hash of the key so that neither logs nor
// metrics carry the key. The tenant decides the prefix-cache domain under
// `--prefix-isolation tenant` and the per-tenant limits, so a client may
// not choose it: the X-Tenant header is honoured only from a key marked
// trusted (a gateway that authenticates its own users), and refused (403)
// from any other key that asks for a tenant not its own. Without keys the
// server has no way to tell clients apart and X-Tenant is taken as sent.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tokenmill::server {

struct ApiKey {
  std::string key;
  std::string tenant;
  bool trusted = false;  // may assert any tenant with X-Tenant
  // Sees every tenant's requests in the views of requests in flight
  // (GET /slots); other keys see only their own tenant's.
  bool admin = false;
};

// "KEY" or "KEY:TENANT" (the tenant after the last ':'). Throws Error for
// an empty key or a tenant that is not a valid tenant name.
ApiKey parse_api_key(std::string_view spec, bool trusted = false, bool admin = false);
// One key per line: "KEY [TENANT] [trusted] [admin]" (the marks in either
// order), '#' starts a comment, blank lines skipped. Throws Error naming
// the file and line of a bad entry.
std::vector<ApiKey> load_api_key_file(const std::string& path);

// The tenant of a key without an explicit one: "key-" + 12 hex digits.
std::string tenant_for_key(std::string_view key);
// Throws Error unless `tenant` is 1..256 bytes without control characters.
void check_tenant_name(std::string_view tenant, std::string_view what);

class ApiKeyTable {
 public:
  ApiKeyTable() = default;
  // Throws Error for a key listed twice with different tenants or marks.
  explicit ApiKeyTable(std::vector<ApiKey> keys);
  bool enabled() const { return !keys_.empty(); }
  // The key an "Authorization: Bearer KEY" header carries, or null. Every
  // listed key is compared in full, so the time taken does not reveal how
  // much of a guess was right.
  const ApiKey* find(std::string_view authorization) const;

 private:
  std::vector<ApiKey> keys_;
};

// The request's tenant: the key's; for a trusted key, the X-Tenant header
// when given; without authentication, the header as sent. Throws ApiError
// 403 when an untrusted key asks for another tenant, 400 for a malformed
// header.
std::string resolve_tenant(const ApiKey* key, bool auth_enabled, const std::string& x_tenant);

}  // namespace tokenmill::server
