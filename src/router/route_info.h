// What the router reads from a request before forwarding it unchanged: the
// affinity key (tenant + the head of the prompt), whether the answer is a
// stream, and the token estimate that the load formula (load.h) counts
// while the request is in flight.
//
// The affinity key hashes the tenant and the first `affinity_bytes` bytes
// of the prompt text, so that requests sharing a prefix (a system prompt, a
// few-shot preamble, a conversation so far) map to the same replica and
// find their KV blocks in its prefix cache. The tenant is the X-Tenant
// header when present (what `serve --prefix-isolation tenant` isolates on),
// else the Authorization header.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace tokenmill::router {

// Used for the estimate when a request names no max_tokens.
inline constexpr int64_t kDefaultMaxTokensEstimate = 256;
// A larger max_tokens is counted as this many: the engine stops a request at
// its context length long before INT32_MAX tokens.
inline constexpr int64_t kMaxTokensEstimateCap = 32768;

struct RouteInfo {
  uint64_t affinity_key = 0;
  int64_t prompt_bytes = 0;      // bytes of prompt text (token ids count 4 bytes each)
  int64_t estimated_tokens = 0;  // prompt_bytes / 4 + n * max_tokens
  bool stream = false;
};

// The prompt text the affinity key covers, in order: a completion's prompt
// (a string; a list of strings concatenated; token ids as 4 little-endian
// bytes each, so that token prompts sharing a prefix share bytes too); a
// chat's message contents (strings, or the text of text parts) concatenated
// in message order. Stops once `limit` bytes are collected; `total_bytes`
// (if not null) receives the size of the whole text. Never throws: parts of
// unexpected types are skipped (the replica reports the error).
std::string prompt_head(const nlohmann::json& body, bool is_chat, size_t limit, int64_t* total_bytes = nullptr);

// X-Tenant if non-empty, else Authorization (possibly empty).
std::string_view tenant_of(std::string_view x_tenant, std::string_view authorization);

// The key that places a request on the ring: xxh3 of tenant + '\n' + head.
uint64_t affinity_key(std::string_view tenant, std::string_view head);

// Everything above from a raw body of /v1/completions (is_chat false) or
// /v1/chat/completions. A body that is not a JSON object is keyed on its
// first `affinity_bytes` bytes and forwarded all the same (the replica
// answers it with a 400).
RouteInfo route_info(std::string_view body, bool is_chat, std::string_view tenant, size_t affinity_bytes);

}  // namespace tokenmill::router
