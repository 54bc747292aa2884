// Runs one scheduled step on the model: applies the batch's copy-on-write
// block copies to the KV pools it owns, turns each batch entry into a
// SequenceChunk (its tokens, positions under its KV policy, block tables
// and, for the heavy-hitter policy, its row of the attention-mass table),
// runs Model::forward and hands back the logits by batch entry
// (StepLogits).
//
// This is the seam between scheduling and compute: what a step computes is
// decided by the Scheduler (ScheduledBatch) and by the engine (which rows
// of logits each entry needs); nothing here samples or changes a sequence.
// The runner owns the attention-mass table its forward pass adds to; the
// Scheduler is handed it (attention_mass()) to evict by and keep aligned.
//
// Sharded model (Model::comm()): each forward pass is first announced to
// the other ranks with the block copies made since the last one.
//
// Thread-safety: engine thread only; the forward pass runs on `pool`.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "kv/paged_kv_storage.h"
#include "model/model.h"
#include "runner/step_logits.h"
#include "sched/attention_mass.h"
#include "sched/scheduled_batch.h"
#include "util/thread_pool.h"

namespace tokenmill::runner {

class ModelRunner {
 public:
  // `pools`: one per KV layer group of the model (Model::kv_layer_groups),
  // in that order; the batch's block tables and copies follow the same
  // order. The model and the thread pool must outlive the runner.
  ModelRunner(model::Model& model, std::vector<std::unique_ptr<kv::PagedKvStorage>> pools, ThreadPool& pool);

  // Called by run() after the block copies and before the forward pass:
  // where drafts from a model run, since they read the step's blocks.
  using BeforeForward = std::function<void()>;
  // Runs the step, in this order: the batch's copy-on-write block copies
  // and key shifts, `before_forward` (when set), then one chunk per entry of
  // `batch` at positions [start_pos, start_pos + num_tokens) with rows[i]
  // logits rows, and every token's final hidden state for the entries
  // flagged in `hidden` (empty, or one flag per entry). Call it once per
  // batch. The view is valid until the next run(). Throws what
  // Model::forward or `before_forward` throws (the KV contents of the
  // step's positions are then undefined; the caller fails the batch).
  StepLogits run(const sched::ScheduledBatch& batch, std::span<const model::LogitRows> rows,
                 std::span<const uint8_t> hidden = {}, const BeforeForward& before_forward = {});

  // One self-speculative draft pass: each input is one token of its
  // sequence at `pos` (a slot the scheduler reserved for this step), run
  // through the layers not flagged in skip_layers, with a logits row each
  // (StepLogits entry i = inputs[i]). Skipped layers' K/V are not written;
  // the step's own pass (run) later writes every layer at those positions.
  struct DraftInput {
    const sched::Sequence* seq = nullptr;
    int32_t token = 0;
    int64_t pos = 0;
  };
  StepLogits run_draft(std::span<const DraftInput> inputs, std::span<const uint8_t> skip_layers);

  // The heavy-hitter policy's score, per sequence (sched/attention_mass.h):
  // for the Scheduler, which must not outlive the runner.
  sched::AttentionMass& attention_mass() { return attention_mass_; }

  size_t num_pools() const { return pools_.size(); }
  const kv::PagedKvStorage& pool(size_t group) const { return *pools_.at(group); }
  // Every pool's bytes, and the bytes of one position in all of them.
  int64_t kv_bytes() const;
  int64_t kv_bytes_per_token() const;

 private:
  // The batch's copy-on-write block copies, in order, then its key shifts.
  void apply_copies(const sched::ScheduledBatch& batch);
  // The forward pass of run().
  StepLogits run_forward(const sched::ScheduledBatch& batch, std::span<const model::LogitRows> rows,
                         std::span<const uint8_t> hidden);
  int64_t rope_offset_for(const sched::Sequence& seq) const;
  // Model::forward, announced first to the other ranks of a sharded model.
  void forward(std::span<const model::SequenceChunk> chunks, std::span<const uint8_t> skip_layers,
               std::vector<float>* hidden = nullptr);
  // chunk_tables_[i * pools .. + pools) = seq's block tables.
  std::span<const model::ChunkTable> tables_for(size_t i, const sched::Sequence& seq);

  model::Model& model_;
  std::vector<std::unique_ptr<kv::PagedKvStorage>> pools_;
  std::vector<kv::PagedKvStorage*> pool_ptrs_;  // what Model::forward takes
  ThreadPool& pool_;
  std::vector<std::vector<int32_t>> chunk_tokens_;  // per entry: the tokens the chunks point into
  std::vector<model::ChunkTable> chunk_tables_;     // [entry * pools + group]
  std::vector<float> logits_;                       // [rows, n_vocab]
  std::vector<float> hidden_;                       // [hidden rows, n_embd]
  sched::AttentionMass attention_mass_;
  std::vector<std::vector<kv::BlockCopy>> pending_copies_;  // per pool: made here, not yet announced
};

}  // namespace tokenmill::runner
