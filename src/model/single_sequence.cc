#include "model/single_sequence.h"

#include <algorithm>
#include <numeric>

#include "util/error.h"

namespace tokenmill::model {
namespace {

// Validates before the pool is sized from it. A policy that keeps the
// positions bounded (re-rotation) may run past the training context, as
// long as the positions it spans stay within it.
int64_t checked_capacity(const Model& model, int64_t capacity, const kv::KvPolicy& policy, int64_t max_step) {
  const int64_t limit = model.config().n_ctx_train;
  if (capacity < 1) fail("context size {} must be at least 1", capacity);
  if (capacity <= limit) return capacity;
  if (!policy.bounds_positions())
    fail(
        "context size {} is outside [1, {}] (the model's training context; only a KV policy that re-rotates runs "
        "past it)",
        capacity, limit);
  const int64_t positions =
      policy.max_blocks(SingleSequence::kBlockSize, std::max<int64_t>(max_step, 1)) * SingleSequence::kBlockSize;
  if (positions > limit)
    fail(
        "context size {} exceeds the model's training context {}, and the KV policy {} spans up to {} positions, "
        "more than it",
        capacity, limit, policy.describe(), positions);
  return capacity;
}

// Blocks of the private pool: the whole capacity, or what the policy keeps.
int64_t pool_blocks(int64_t capacity, const kv::KvPolicy& policy, int64_t max_step) {
  const int64_t bs = SingleSequence::kBlockSize;
  const int64_t all = (capacity + bs - 1) / bs;
  if (!policy.evicts()) return all;
  if (max_step < 1) fail("a KV policy that evicts needs the largest step (got {})", max_step);
  return std::min(all, policy.max_blocks(bs, max_step));
}

}  // namespace

SingleSequence::SingleSequence(Model& model, int64_t capacity, kv::KvDtype dtype, const kv::KvPolicy& policy,
                               int64_t max_step, ThreadPool* pool)
    : model_(model),
      capacity_(checked_capacity(model, capacity, policy, max_step)),
      policy_(policy),
      max_step_(max_step),
      pool_(pool),
      storage_(model.kv_geometry(kBlockSize, dtype), pool_blocks(capacity_, policy, max_step)) {
  policy_.validate();
  if (policy_.evicts() && policy_.positions == kv::KvPositions::kRerotate && pool_ == nullptr)
    fail("re-rotating keys needs a thread pool");
  for (int32_t b = storage_.num_blocks(); b-- > 0;) free_blocks_.push_back(b);
}

void SingleSequence::evict_by_policy() {
  const std::vector<int64_t> evicted = kv::blocks_to_evict_now(policy_, size_ - evicted_, kBlockSize, mass_);
  if (evicted.empty()) return;
  std::vector<kv::KeyShift> moved;
  std::vector<int32_t> kept;
  for (int64_t b = 0; b < std::ssize(block_table_); ++b) {
    const int32_t id = block_table_[static_cast<size_t>(b)];
    if (std::binary_search(evicted.begin(), evicted.end(), b)) {
      free_blocks_.push_back(id);
      continue;
    }
    kept.push_back(id);
    if (const int64_t before = kv::evicted_before(evicted, b); before > 0) moved.push_back({id, -before * kBlockSize});
  }
  block_table_ = std::move(kept);
  kv::erase_evicted_positions(mass_, evicted, kBlockSize);
  evicted_ += static_cast<int64_t>(evicted.size()) * kBlockSize;
  if (policy_.positions != kv::KvPositions::kRerotate) return;
  kv::PagedKvStorage* const pools[] = {&storage_};
  const std::vector<kv::KeyShift>* list = &moved;
  model_.shift_keys(pools, {list, 1}, *pool_);
}

void SingleSequence::forward(std::span<const int32_t> tokens, LogitRows rows, std::vector<float>& logits,
                             ThreadPool& pool) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  if (size_ + n > capacity_) fail("context is full: {} positions needed, the context holds {}", size_ + n, capacity_);
  if (policy_.evicts() && n > max_step_) fail("a step of {} tokens exceeds the largest step {}", n, max_step_);
  evict_by_policy();
  const int64_t start = size_ - evicted_;
  const auto needed = static_cast<size_t>((start + n + kBlockSize - 1) / kBlockSize);
  const size_t held = block_table_.size();
  if (needed > held + free_blocks_.size())
    fail("the KV pool holds {} blocks, {} positions need {}", storage_.num_blocks(), start + n, needed);
  while (block_table_.size() < needed) {
    block_table_.push_back(free_blocks_.back());
    free_blocks_.pop_back();
  }
  const ChunkTable table{block_table_, 0};
  SequenceChunk chunk{tokens, start, {&table, 1}, rows};
  chunk.rope_offset = policy_.positions == kv::KvPositions::kPreserve ? evicted_ : 0;
  chunk.adapter = adapter_;
  if (policy_.needs_attention_mass()) {
    mass_.resize(static_cast<size_t>(start + n), 0.0f);
    chunk.key_mass = mass_.data();
  }
  try {
    model_.forward({&chunk, 1}, storage_, logits, pool);
  } catch (...) {
    if (std::ssize(mass_) > start) mass_.resize(static_cast<size_t>(start));
    while (block_table_.size() > held) {  // the size stays unchanged
      free_blocks_.push_back(block_table_.back());
      block_table_.pop_back();
    }
    throw;
  }
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
