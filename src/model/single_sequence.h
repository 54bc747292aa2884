// One sequence run on its own, for tools (`tokenmill run`, `tokenmill
// logits`, `tokenmill eval`) and tests: a private paged KV pool just large
// enough for `capacity` positions (block i holds positions [16 i, 16 i + 16)).
// The serving engine shares one pool between many sequences instead.
//
// With a KV policy that evicts (kv/kv_policy.h), each forward() call is a
// step: before it, the blocks the policy drops go (those that left the
// window, or the least-attended ones past the budget; their successors
// re-rotated under kRerotate), exactly as the scheduler does
// for a served sequence; the pool then holds only the policy's blocks for
// steps of up to max_step tokens.
//
// Thread-safety: one caller at a time, as Model::forward.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "kv/paged_kv_storage.h"
#include "model/model.h"
#include "util/thread_pool.h"

namespace tokenmill::model {

class SingleSequence {
 public:
  static constexpr int64_t kBlockSize = 16;

  // Throws Error when capacity is not in [1, n_ctx_train] (any capacity
  // >= 1 under a policy that bounds positions, kv::KvPolicy::
  // bounds_positions(), whose positions must fit n_ctx_train) or the pool
  // cannot be allocated. Memory: capacity rounded up to kBlockSize times
  // model.kv_geometry(...).bytes_per_token(). `model` must outlive this.
  SingleSequence(Model& model, int64_t capacity, kv::KvDtype dtype, const kv::KvPolicy& policy = {},
                 int64_t max_step = 0, ThreadPool* pool = nullptr);

  // (With an evicting policy: max_step > 0 bounds each forward()'s tokens,
  // and `pool` runs the key rotations of kRerotate.)
  // Appends tokens at positions [size(), size() + tokens.size()) and writes
  // the logits [num_rows, n_vocab] (rows as SequenceChunk::logits says; the bool
  // form: every token's row with all_logits, else
  // the last one's). Throws Error when the tokens do not fit the capacity,
  // and for what Model::forward rejects; the size then stays unchanged.
  void forward(std::span<const int32_t> tokens, LogitRows rows, std::vector<float>& logits, ThreadPool& pool);
  void forward(std::span<const int32_t> tokens, bool all_logits, std::vector<float>& logits, ThreadPool& pool) {
    forward(tokens, all_logits ? LogitRows::kAll : LogitRows::kLast, logits, pool);
  }

  // Runs the later forward calls with this LoRA adapter (null: the base
  // weights). It must be loaded for this model and outlive its use.
  void set_adapter(const LoraAdapter* adapter) { adapter_ = adapter; }

  int64_t size() const { return size_; }
  // Positions the policy evicted so far.
  int64_t evicted() const { return evicted_; }
  int64_t capacity() const { return capacity_; }
  kv::KvDtype dtype() const { return storage_.geometry().dtype; }

 private:
  Model& model_;
  int64_t capacity_ = 0;
  int64_t size_ = 0;
  kv::KvPolicy policy_;
  int64_t max_step_ = 0;
  ThreadPool* pool_ = nullptr;
  int64_t evicted_ = 0;
  kv::PagedKvStorage storage_;
  std::vector<int32_t> block_table_;  // held blocks, in position order
  std::vector<int32_t> free_blocks_;  // the pool's others
  std::vector<float> mass_;           // heavy-hitter policy: attention mass per cache index

  void evict_by_policy();
  const LoraAdapter* adapter_ = nullptr;
};

// The greedy continuation of `prompt`: n tokens, each the argmax of the
// previous step's logits (ties to the lower id, the Sampler's greedy rule),
// the prompt in one forward pass and then one token per pass, in a private
// SingleSequence with a `dtype` cache. A reference for tests of the engine
// and of the kernels (no scheduler, no shared pool), and the generator of
// the eval task set. `done`, when given, is asked after each token (the
// output so far, that token last) whether to stop there.
using GreedyDone = std::function<bool(std::span<const int32_t> output)>;
std::vector<int32_t> greedy_continuation(Model& model, std::span<const int32_t> prompt, int64_t n, kv::KvDtype dtype,
                                         ThreadPool& pool, const GreedyDone& done = {});

}  // namespace tokenmill::model
