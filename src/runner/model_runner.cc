#include "runner/model_runner.h"

#include <algorithm>

#include "util/check.h"

namespace tokenmill::runner {

ModelRunner::ModelRunner(model::Model& model, std::vector<std::unique_ptr<kv::PagedKvStorage>> pools, ThreadPool& pool)
    : model_(model), pools_(std::move(pools)), pool_(pool) {
  TM_CHECK(!pools_.empty());
  for (const auto& p : pools_) {
    TM_CHECK(p != nullptr);
    pool_ptrs_.push_back(p.get());
  }
}

int64_t ModelRunner::kv_bytes() const {
  int64_t n = 0;
  for (const auto& p : pools_) n += p->total_bytes();
  return n;
}

int64_t ModelRunner::kv_bytes_per_token() const {
  int64_t n = 0;
  for (const auto& p : pools_) n += p->geometry().bytes_per_token();
  return n;
}

void ModelRunner::apply_copies(const sched::ScheduledBatch& batch) {
  TM_CHECK(batch.copies.size() <= pools_.size());
  if (model_.comm() != nullptr) pending_copies_.resize(pools_.size());
  for (size_t g = 0; g < batch.copies.size(); ++g) {
    for (const kv::BlockCopy& c : batch.copies[g]) pools_[g]->copy_block(c.src, c.dst);
    // The other ranks copy their shards of the same blocks before the next
    // forward pass they run (which is the first one to read them).
    if (model_.comm() != nullptr)
      pending_copies_[g].insert(pending_copies_[g].end(), batch.copies[g].begin(), batch.copies[g].end());
  }
  // Keys that moved down the cache (KV policy kRerotate), once copied.
  const bool any_shift =
      std::any_of(batch.key_shifts.begin(), batch.key_shifts.end(), [](const auto& group) { return !group.empty(); });
  if (any_shift) model_.shift_keys(pool_ptrs_, batch.key_shifts, pool_);
}

void ModelRunner::forward(std::span<const model::SequenceChunk> chunks, std::span<const uint8_t> skip_layers,
                          std::vector<float>* hidden) {
  model::ParallelComm* comm = model_.comm();
  if (comm != nullptr) {
    model_.check_step(chunks, pool_ptrs_, skip_layers);  // a bad step fails here, before the others run it
    pending_copies_.resize(pools_.size());
    comm->publish_step(pending_copies_, chunks, skip_layers);
    for (auto& c : pending_copies_) c.clear();
  }
  model_.forward(chunks, pool_ptrs_, logits_, pool_, skip_layers, hidden);
}

std::span<const model::ChunkTable> ModelRunner::tables_for(size_t i, const sched::Sequence& seq) {
  const size_t groups = pools_.size();
  TM_CHECK(seq.tables.size() == groups);
  for (size_t g = 0; g < groups; ++g) {
    const kv::BlockTable& t = seq.table(g);
    chunk_tables_[i * groups + g] = model::ChunkTable{t.blocks(), t.first_block()};
  }
  return std::span<const model::ChunkTable>(chunk_tables_).subspan(i * groups, groups);
}

StepLogits ModelRunner::run_draft(std::span<const DraftInput> inputs, std::span<const uint8_t> skip_layers) {
  const size_t n = inputs.size();
  chunk_tokens_.resize(n);
  chunk_tables_.resize(n * pools_.size());
  std::vector<model::SequenceChunk> chunks(n);
  std::vector<size_t> first_row(n + 1, 0);
  for (size_t i = 0; i < n; ++i) {
    chunk_tokens_[i].assign(1, inputs[i].token);
    chunks[i] =
        model::SequenceChunk{chunk_tokens_[i], inputs[i].pos, tables_for(i, *inputs[i].seq), model::LogitRows::kLast};
    chunks[i].adapter = inputs[i].seq->adapter.get();
    first_row[i + 1] = i + 1;
  }
  forward(chunks, skip_layers);
  return StepLogits(logits_, static_cast<size_t>(model_.config().n_vocab), std::move(first_row));
}

int64_t ModelRunner::rope_offset_for(const sched::Sequence& seq) const {
  return seq.policy().positions == kv::KvPositions::kPreserve ? seq.kv_evicted : 0;
}

StepLogits ModelRunner::run(const sched::ScheduledBatch& batch, std::span<const model::LogitRows> rows,
                            std::span<const uint8_t> hidden, const BeforeForward& before_forward) {
  apply_copies(batch);
  if (before_forward) before_forward();
  return run_forward(batch, rows, hidden);
}

StepLogits ModelRunner::run_forward(const sched::ScheduledBatch& batch, std::span<const model::LogitRows> rows,
                                    std::span<const uint8_t> hidden) {
  TM_CHECK(rows.size() == batch.seqs.size());
  TM_CHECK(hidden.empty() || hidden.size() == batch.seqs.size());

  const size_t n = batch.seqs.size();
  const size_t groups = pools_.size();
  chunk_tokens_.resize(n);
  chunk_tables_.resize(n * groups);
  std::vector<model::SequenceChunk> chunks(n);
  std::vector<size_t> first_row(n + 1, 0);
  std::vector<size_t> first_hidden(n + 1, 0);
  for (size_t i = 0; i < n; ++i) {
    const sched::ScheduledSeq& s = batch.seqs[i];
    chunk_tokens_[i] = s.tokens();
    model::SequenceChunk& c = chunks[i];
    c.tokens = chunk_tokens_[i];
    // Cache positions skip what the KV policy evicted; RoPE positions are
    // the true ones unless the evicted keys' successors were re-rotated.
    c.start_pos = s.start_pos - s.seq->kv_evicted;
    c.rope_offset = rope_offset_for(*s.seq);
    c.tables = tables_for(i, *s.seq);
    c.logits = rows[i];
    c.hidden = !hidden.empty() && hidden[i] != 0;
    c.adapter = s.seq->adapter.get();
    if (s.seq->policy().needs_attention_mass())  // the heavy-hitter policy's score
      c.key_mass = attention_mass_.resize(s.seq->id, c.start_pos + s.num_tokens).data();
    first_row[i + 1] = first_row[i] + static_cast<size_t>(model::num_logit_rows(c));
    first_hidden[i + 1] = first_hidden[i] + static_cast<size_t>(model::num_hidden_rows(c));
  }
  const bool any_hidden = first_hidden[n] > 0;
  forward(chunks, {}, any_hidden ? &hidden_ : nullptr);
  StepLogits out(logits_, static_cast<size_t>(model_.config().n_vocab), std::move(first_row));
  if (any_hidden) out.set_hidden(hidden_, static_cast<size_t>(model_.config().n_embd), std::move(first_hidden));
  return out;
}

}  // namespace tokenmill::runner
