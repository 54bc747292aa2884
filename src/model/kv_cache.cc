#include "model/kv_cache.h"

#include "util/check.h"
#include "util/error.h"

namespace tokenmill::model {

SequenceKvCache::SequenceKvCache(const ModelConfig& config, int64_t capacity)
    : capacity_(capacity), n_kv_dim_(config.n_kv_dim()) {
  if (capacity < 1 || capacity > config.n_ctx_train)
    fail("context size {} is outside [1, {}] (the model's training context)", capacity,
         config.n_ctx_train);
  const size_t per_layer = static_cast<size_t>(capacity * n_kv_dim_);
  k_.resize(static_cast<size_t>(config.n_layer));
  v_.resize(static_cast<size_t>(config.n_layer));
  for (size_t i = 0; i < k_.size(); ++i) {
    k_[i].assign(per_layer, 0.0f);
    v_[i].assign(per_layer, 0.0f);
  }
}

void SequenceKvCache::set_size(int64_t size) {
  TM_CHECK(size >= 0 && size <= capacity_);
  size_ = size;
}

}  // namespace tokenmill::model
