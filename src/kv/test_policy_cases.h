// The evicting KV policies the parametrized scheduler and engine tests run
// under (test code only): streaming and h2o, each with keys preserved or
// re-rotated, and a readable test name for each.
#pragma once

#include <string>
#include <utility>

#include "kv/kv_policy.h"

namespace tokenmill::kv::testing {

using PolicyCase = std::pair<KvPolicyKind, KvPositions>;

inline const PolicyCase kEvictingPolicyCases[] = {{KvPolicyKind::kStreaming, KvPositions::kPreserve},
                                                  {KvPolicyKind::kStreaming, KvPositions::kRerotate},
                                                  {KvPolicyKind::kHeavyHitter, KvPositions::kPreserve},
                                                  {KvPolicyKind::kHeavyHitter, KvPositions::kRerotate}};

// "streaming_preserve", "h2o_rerotate", ...
inline std::string policy_case_name(const PolicyCase& c) {
  return std::string(c.first == KvPolicyKind::kHeavyHitter ? "h2o_" : "streaming_") +
         std::string(kv_positions_name(c.second));
}

}  // namespace tokenmill::kv::testing
