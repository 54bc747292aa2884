// libFuzzer target for util/bounded_json.h, differential: every input
// either parses to exactly the tree nlohmann's DOM parser builds (key order
// and duplicate handling included), or is refused by both as malformed, or
// is refused by the bounded parser alone for a stated limit (depth, keys,
// memory) that the input really exceeds. The shared budget must be whole
// again after every call.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include <nlohmann/json.hpp>

#include "util/bounded_json.h"

namespace {

void require(bool ok) {
  if (!ok) std::abort();
}

// Nesting depth, counted up to `cap` (so a deep document does not recurse
// deeply here).
int depth_of(const nlohmann::ordered_json& j, int cap) {
  if (!j.is_structured() || cap == 0) return 0;
  int d = 0;
  for (const auto& e : j) d = std::max(d, depth_of(e, cap - 1));
  return d + 1;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  tokenmill::util::SharedByteBudget shared(size_t{64} << 20);
  tokenmill::util::JsonLimits limits;
  limits.max_depth = 64;
  limits.max_object_keys = 64;
  limits.max_bytes = size_t{1} << 20;
  limits.shared = &shared;
  nlohmann::ordered_json theirs;
  bool they_parse = true;
  try {
    theirs = nlohmann::ordered_json::parse(text);
  } catch (const nlohmann::ordered_json::exception&) {
    they_parse = false;
  }
  try {
    const nlohmann::ordered_json ours = tokenmill::util::parse_bounded<nlohmann::ordered_json>(text, limits);
    require(they_parse && ours == theirs && ours.dump() == theirs.dump());
  } catch (const tokenmill::util::JsonLimitError& e) {
    using tokenmill::util::JsonRefusal;
    switch (e.why()) {
      case JsonRefusal::kSyntax: require(!they_parse); break;
      // Refused for a limit: never a document nlohmann calls malformed
      // past the point of refusal is checked; a valid one must exceed it.
      case JsonRefusal::kTooDeep:
        require(!they_parse || depth_of(theirs, limits.max_depth + 1) > limits.max_depth);
        break;
      case JsonRefusal::kTooManyKeys:
      case JsonRefusal::kTooLarge: break;              // counted on the way (duplicates included): no cheap recount
      case JsonRefusal::kBusy: require(false); break;  // nothing else holds the budget
    }
  }
  require(shared.in_use() == 0);
  return 0;
}
