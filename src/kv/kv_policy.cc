#include "kv/kv_policy.h"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "util/error.h"
#include "util/int_math.h"

namespace tokenmill::kv {

void KvPolicy::validate() const {
  if (kind == KvPolicyKind::kFull) return;
  if (window < 1) fail("--kv-window must be at least 1 position (got {})", window);
  if (sinks < 0) fail("--kv-sinks must not be negative (got {})", sinks);
  if (kind == KvPolicyKind::kHeavyHitter && budget < sinks + window)
    fail("--kv-budget ({}) must hold at least the sinks and the window ({} + {})", budget, sinks, window);
}

std::string KvPolicy::describe() const {
  switch (kind) {
    case KvPolicyKind::kFull: return "full";
    case KvPolicyKind::kStreaming:
      return fmt::format("streaming(sinks={},window={},positions={})", sinks, window, kv_positions_name(positions));
    case KvPolicyKind::kHeavyHitter:
      return fmt::format("h2o(sinks={},window={},budget={},positions={})", sinks, window, budget,
                         kv_positions_name(positions));
  }
  return "full";
}

int64_t KvPolicy::max_blocks(int64_t block_size, int64_t step_tokens) const {
  const int64_t step_blocks = ceil_div(step_tokens, block_size);
  if (kind == KvPolicyKind::kHeavyHitter) {
    // Eviction stops at the budget, or earlier when every block past the
    // sinks touches the window: then the cache ends less than one block
    // past sinks + window, (sink_blocks + 1) * bs + window - 2 positions.
    const int64_t kept = std::max(budget, (sink_blocks(block_size) + 1) * block_size + window - 2);
    return ceil_div(kept, block_size) + step_blocks;
  }
  // After eviction the window's first position may sit anywhere in its
  // block: ceil((window - 1) / bs) + 1 blocks reach the step's first query,
  // whose block the step's tokens then extend.
  const int64_t window_blocks = (window - 1 + block_size - 1) / block_size + 1;
  return sink_blocks(block_size) + window_blocks + step_blocks;
}

std::vector<int64_t> blocks_to_evict_now(const KvPolicy& policy, int64_t cached, int64_t block_size,
                                         std::span<const float> mass) {
  std::vector<int64_t> out;
  const int64_t first = policy.sink_blocks(block_size);
  if (policy.kind == KvPolicyKind::kStreaming) {
    const int64_t n = blocks_to_evict(policy, cached, block_size);
    for (int64_t i = 0; i < n; ++i) out.push_back(first + i);
    return out;
  }
  if (policy.kind != KvPolicyKind::kHeavyHitter || cached <= policy.budget) return out;
  // Candidates end at or before the window's first index, cached - window + 1
  // (evicting earlier blocks moves the window and them alike).
  const int64_t end = (cached - policy.window + 1) / block_size;  // candidates: [first, end)
  if (end <= first) return out;
  std::vector<std::pair<double, int64_t>> by_mass;
  for (int64_t b = first; b < end; ++b) {
    double m = 0;
    for (int64_t i = b * block_size; i < (b + 1) * block_size && i < std::ssize(mass); ++i)
      m += mass[static_cast<size_t>(i)];
    by_mass.emplace_back(m, b);
  }
  std::sort(by_mass.begin(), by_mass.end());  // least mass first, then the older block
  const int64_t need = ceil_div(cached - policy.budget, block_size);
  for (int64_t i = 0; i < std::min<int64_t>(need, std::ssize(by_mass)); ++i)
    out.push_back(by_mass[static_cast<size_t>(i)].second);
  std::sort(out.begin(), out.end());
  return out;
}

int64_t evicted_before(std::span<const int64_t> evicted, int64_t block) {
  return std::lower_bound(evicted.begin(), evicted.end(), block) - evicted.begin();
}

void erase_evicted_positions(std::vector<float>& per_position, std::span<const int64_t> evicted, int64_t block_size) {
  for (auto it = evicted.rbegin(); it != evicted.rend(); ++it) {
    const int64_t b = *it * block_size;
    if (b >= std::ssize(per_position)) continue;
    const int64_t e = std::min<int64_t>(b + block_size, std::ssize(per_position));
    per_position.erase(per_position.begin() + b, per_position.begin() + e);
  }
}

int64_t blocks_to_evict(const KvPolicy& policy, int64_t cached, int64_t block_size) {
  if (policy.kind != KvPolicyKind::kStreaming) return 0;
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

KvPolicy heavy_hitter_policy(int64_t sinks, int64_t window, int64_t budget, KvPositions positions) {
  KvPolicy p;
  p.kind = KvPolicyKind::kHeavyHitter;
  p.sinks = sinks;
  p.window = window;
  p.budget = budget;
  p.positions = positions;
  p.validate();
  return p;
}

KvPolicy make_kv_policy(std::string_view kind, int64_t sinks, int64_t window, std::string_view positions,
                        int64_t budget) {
  const std::optional<KvPolicyKind> k = kv_policy_kind_from_name(kind);
  if (!k) fail("--kv-policy '{}' is not one of: full, streaming, h2o", kind);
  const std::optional<KvPositions> pos = kv_positions_from_name(positions);
  if (!pos) fail("--kv-positions '{}' is not one of: preserve, rerotate", positions);
  if (*k == KvPolicyKind::kFull) return {};
  if (*k == KvPolicyKind::kHeavyHitter) return heavy_hitter_policy(sinks, window, budget, *pos);
  return streaming_policy(sinks, window, *pos);
}

std::optional<KvPolicyKind> kv_policy_kind_from_name(std::string_view name) {
  if (name == "full") return KvPolicyKind::kFull;
  if (name == "streaming") return KvPolicyKind::kStreaming;
  if (name == "h2o") return KvPolicyKind::kHeavyHitter;
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
