#include "gguf/weight_types.h"

#include <algorithm>
#include <map>

#include "gguf/tensor_type.h"

namespace tokenmill::gguf {

std::vector<TypeShare> weight_type_shares(std::span<const TensorInfo> tensors) {
  std::map<std::string, uint64_t> by_type;
  uint64_t total = 0;
  for (const TensorInfo& t : tensors) {
    by_type[std::string(tensor_type_name(t.type))] += t.num_bytes;
    total += t.num_bytes;
  }
  std::vector<TypeShare> out;
  for (const auto& [type, bytes] : by_type)
    out.push_back({type, bytes, total ? static_cast<double>(bytes) / static_cast<double>(total) : 0.0});
  std::stable_sort(out.begin(), out.end(), [](const TypeShare& a, const TypeShare& b) { return a.bytes > b.bytes; });
  return out;
}

}  // namespace tokenmill::gguf
