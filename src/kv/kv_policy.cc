#include "kv/kv_policy.h"

#include <fmt/format.h>

#include "util/error.h"

namespace tokenmill::kv {

void KvPolicy::validate() const {
  if (kind == KvPolicyKind::kFull) return;
  if (window < 1) fail("--kv-window must be at least 1 position (got {})", window);
  if (sinks < 0) fail("--kv-sinks must not be negative (got {})", sinks);
}

std::string KvPolicy::describe() const {
  if (kind == KvPolicyKind::kFull) return "full";
  return fmt::format("streaming(sinks={},window={},positions={})", sinks, window, kv_positions_name(positions));
}

int64_t KvPolicy::max_blocks(int64_t block_size, int64_t step_tokens) const {
  // After eviction the window's first position may sit anywhere in its
  // block: ceil((window - 1) / bs) + 1 blocks reach the step's first query,
  // whose block the step's tokens then extend.
  const int64_t window_blocks = (window - 1 + block_size - 1) / block_size + 1;
  const int64_t step_blocks = (step_tokens + block_size - 1) / block_size;
  return sink_blocks(block_size) + window_blocks + step_blocks;
}

int64_t blocks_to_evict(const KvPolicy& policy, int64_t cached, int64_t block_size) {
  if (!policy.evicts()) return 0;
  const int64_t first = policy.sink_blocks(block_size);
  int64_t n = 0;
  // Block `first` (after n evictions, the query is at cached - n * bs) goes
  // when it ends at or before the window's first index.
  while ((first + 1) * block_size <= cached - n * block_size - policy.window + 1) ++n;
  return n;
}

KvPolicy streaming_policy(int64_t sinks, int64_t window, KvPositions positions) {
  KvPolicy p;
  p.kind = KvPolicyKind::kStreaming;
  p.sinks = sinks;
  p.window = window;
  p.positions = positions;
  p.validate();
  return p;
}

KvPolicy make_kv_policy(std::string_view kind, int64_t sinks, int64_t window, std::string_view positions) {
  const std::optional<KvPolicyKind> k = kv_policy_kind_from_name(kind);
  if (!k) fail("--kv-policy '{}' is not one of: full, streaming", kind);
  const std::optional<KvPositions> pos = kv_positions_from_name(positions);
  if (!pos) fail("--kv-positions '{}' is not one of: preserve, rerotate", positions);
  if (*k == KvPolicyKind::kFull) return {};
  return streaming_policy(sinks, window, *pos);
}

std::optional<KvPolicyKind> kv_policy_kind_from_name(std::string_view name) {
  if (name == "full") return KvPolicyKind::kFull;
  if (name == "streaming") return KvPolicyKind::kStreaming;
  return std::nullopt;
}

std::optional<KvPositions> kv_positions_from_name(std::string_view name) {
  if (name == "preserve") return KvPositions::kPreserve;
  if (name == "rerotate") return KvPositions::kRerotate;
  return std::nullopt;
}

std::string_view kv_positions_name(KvPositions positions) {
  return positions == KvPositions::kRerotate ? "rerotate" : "preserve";
}

}  // namespace tokenmill::kv
