// The draft model of `--spec draft`: a second, smaller GGUF with the
// target's vocabulary, with its own paged KV pool and one block table per
// sequence, run on the engine's thread pool between schedule and the
// target's forward pass.
//
// Its KV follows each sequence lazily. prepare() compares the tokens the
// draft has computed K/V for with the sequence as it now stands (prompt +
// output) and keeps the longest common prefix: after a verification that
// is everything up to the first rejected draft token, after a preemption
// everything (the draft's KV is its own and survives it). The first draft
// pass then feeds the rest (the whole prompt the first time, a catch-up
// chunk) and later passes one draft token each; every pass is one batched
// forward over all drafting sequences.
//
// Vocabulary: the draft must use the target's token ids, so the two files'
// tokenizers must list the same tokens (checked at load; a difference is
// an Error naming the first token that differs).
//
// Memory: the draft pool is sized by the caller (EngineCore gives it as
// many bytes as the target's KV pool, at most max_seqs full contexts);
// when it is short a sequence simply gets no draft that step.
//
// Thread-safety: engine thread only.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "kv/block_allocator.h"
#include "kv/block_table.h"
#include "kv/paged_kv_storage.h"
#include "model/model.h"
#include "runner/step_logits.h"
#include "tokenizer/tokenizer.h"
#include "util/thread_pool.h"

namespace tokenmill::spec {

// Throws Error unless `draft` can draft for `target`: the same number of
// logits (n_vocab) and, when either file has a tokenizer, both have one
// listing the same tokens.
void check_same_vocabulary(const model::Model& target, const model::Model& draft);

class DraftModel {
 public:
  // Loads `path`, checks it against `target` (check_same_vocabulary) and
  // allocates a pool of `kv_bytes` (at least one block) of `dtype`
  // elements in blocks of `block_size` positions. Throws Error.
  DraftModel(const std::string& path, const model::Model& target, int64_t block_size, kv::KvDtype dtype,
             int64_t kv_bytes, ThreadPool& pool);
  ~DraftModel();

  // Brings sequence `id`'s draft KV in line with `tokens` (its prompt and
  // output; the last token not yet computed) and reserves slots for
  // num_draft passes. Returns the tokens the first pass must feed (at least
  // the last one), or nullopt when the pool is short: no draft this step.
  std::optional<std::span<const int32_t>> prepare(uint64_t id, std::span<const int32_t> tokens, int64_t num_draft);

  // One draft pass: each feed's tokens at the sequence's next positions
  // (after prepare, within what it reserved), one logits row each (entry
  // i = feeds[i]). Throws what Model::forward throws.
  struct Feed {
    uint64_t id = 0;
    std::span<const int32_t> tokens;
  };
  runner::StepLogits run(std::span<const Feed> feeds);

  // Frees a sequence's draft KV (its request ended); unknown ids are ignored.
  void release(uint64_t id);

  const model::Model& model() const { return *model_; }
  int64_t num_blocks() const { return storage_->num_blocks(); }
  int64_t num_blocks_used() const { return allocator_->num_used(); }
  size_t num_sequences() const { return seqs_.size(); }

 private:
  struct SeqKv {
    kv::BlockTable table;
    std::vector<int32_t> fed;  // tokens whose K/V the draft holds, positions 0..
  };

  std::unique_ptr<model::Model> model_;
  std::unique_ptr<kv::PagedKvStorage> storage_;
  std::unique_ptr<kv::BlockAllocator> allocator_;
  int32_t block_size_;
  ThreadPool& pool_;
  std::unordered_map<uint64_t, SeqKv> seqs_;
  std::vector<float> logits_;
};

}  // namespace tokenmill::spec
