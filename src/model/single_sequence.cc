#include "model/single_sequence.h"

#include <algorithm>
#include <numeric>

#include "util/error.h"

namespace tokenmill::model {
namespace {

// Validates before the pool is sized from it.
int64_t checked_capacity(const Model& model, int64_t capacity) {
  const int64_t limit = model.config().n_ctx_train;
  if (capacity < 1 || capacity > limit)
    fail("context size {} is outside [1, {}] (the model's training context)", capacity, limit);
  return capacity;
}

}  // namespace

SingleSequence::SingleSequence(Model& model, int64_t capacity, kv::KvDtype dtype)
    : model_(model),
      capacity_(checked_capacity(model, capacity)),
      storage_(model.kv_geometry(kBlockSize, dtype), (capacity_ + kBlockSize - 1) / kBlockSize),
      block_table_(static_cast<size_t>(storage_.num_blocks())) {
  std::iota(block_table_.begin(), block_table_.end(), 0);
}

void SingleSequence::forward(std::span<const int32_t> tokens, LogitRows rows, std::vector<float>& logits,
                             ThreadPool& pool) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  if (size_ + n > capacity_) fail("context is full: {} positions needed, the context holds {}", size_ + n, capacity_);
  const ChunkTable table{block_table_, 0};
  SequenceChunk chunk{tokens, size_, {&table, 1}, rows};
  chunk.adapter = adapter_;
  model_.forward({&chunk, 1}, storage_, logits, pool);
  size_ += n;
}

std::vector<int32_t> greedy_continuation(Model& model, std::span<const int32_t> prompt, int64_t n, kv::KvDtype dtype,
                                         ThreadPool& pool, const GreedyDone& done) {
  SingleSequence seq(model, static_cast<int64_t>(prompt.size()) + n, dtype);
  std::vector<float> logits;
  std::vector<int32_t> out;
  seq.forward(prompt, false, logits, pool);
  for (int64_t i = 0; i < n; ++i) {
    // max_element returns the first maximum: ties go to the lower id.
    out.push_back(static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin()));
    if (done && done(out)) break;
    if (i + 1 < n) seq.forward(std::span<const int32_t>(&out.back(), 1), false, logits, pool);
  }
  return out;
}

}  // namespace tokenmill::model
