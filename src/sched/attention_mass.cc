#include "sched/attention_mass.h"

#include "kv/kv_policy.h"

namespace tokenmill::sched {

std::span<float> AttentionMass::resize(uint64_t seq, int64_t num_positions) {
  std::vector<float>& mass = mass_[seq];
  mass.resize(static_cast<size_t>(num_positions), 0.0f);
  return mass;
}

std::span<const float> AttentionMass::get(uint64_t seq) const {
  const auto it = mass_.find(seq);
  return it == mass_.end() ? std::span<const float>{} : std::span<const float>(it->second);
}

void AttentionMass::trim(uint64_t seq, int64_t num_positions) {
  const auto it = mass_.find(seq);
  if (it != mass_.end() && std::ssize(it->second) > num_positions)
    it->second.resize(static_cast<size_t>(num_positions));
}

void AttentionMass::erase_blocks(uint64_t seq, std::span<const int64_t> evicted, int64_t block_size) {
  const auto it = mass_.find(seq);
  if (it != mass_.end()) kv::erase_evicted_positions(it->second, evicted, block_size);
}

void AttentionMass::fork(uint64_t parent, uint64_t child) {
  const auto it = mass_.find(parent);
  if (it != mass_.end()) mass_[child] = it->second;
}

}  // namespace tokenmill::sched
