// K/V storage for one sequence: for every layer, a contiguous FP32 array of
// `capacity` positions. Row j holds the key (value) of position j.
// Memory: 2 * n_layer * capacity * n_kv_dim * 4 bytes, allocated up front.
// (The engine's paged cache replaces this for serving; the maths is shared.)
#pragma once

#include <cstdint>
#include <vector>

#include "model/config.h"

namespace tokenmill::model {

class SequenceKvCache {
 public:
  // Throws Error when capacity is not in [1, n_ctx_train] or too large to allocate.
  SequenceKvCache(const ModelConfig& config, int64_t capacity);

  int64_t capacity() const { return capacity_; }
  int64_t n_kv_dim() const { return n_kv_dim_; }
  // Positions [0, size) hold valid entries.
  int64_t size() const { return size_; }
  void set_size(int64_t size);

  float* keys(int64_t layer) { return k_[static_cast<size_t>(layer)].data(); }      // [capacity, n_kv_dim]
  float* values(int64_t layer) { return v_[static_cast<size_t>(layer)].data(); }    // [capacity, n_kv_dim]
  const float* keys(int64_t layer) const { return k_[static_cast<size_t>(layer)].data(); }
  const float* values(int64_t layer) const { return v_[static_cast<size_t>(layer)].data(); }

 private:
  int64_t capacity_ = 0;
  int64_t n_kv_dim_ = 0;
  int64_t size_ = 0;
  std::vector<std::vector<float>> k_;
  std::vector<std::vector<float>> v_;
};

}  // namespace tokenmill::model
