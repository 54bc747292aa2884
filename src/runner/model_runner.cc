#include "runner/model_runner.h"

#include "util/check.h"

namespace tokenmill::runner {

ModelRunner::ModelRunner(model::Model& model, std::unique_ptr<kv::PagedKvStorage> full,
                         std::unique_ptr<kv::PagedKvStorage> window, ThreadPool& pool)
    : model_(model), full_(std::move(full)), window_(std::move(window)), pool_(pool) {
  TM_CHECK(full_ != nullptr);
}

int64_t ModelRunner::kv_bytes() const { return full_->total_bytes() + (window_ ? window_->total_bytes() : 0); }

int64_t ModelRunner::kv_bytes_per_token() const {
  return full_->geometry().bytes_per_token() + (window_ ? window_->geometry().bytes_per_token() : 0);
}

StepLogits ModelRunner::run(const sched::ScheduledBatch& batch, std::span<const model::LogitRows> rows) {
  TM_CHECK(rows.size() == batch.seqs.size());
  for (const kv::BlockCopy& c : batch.copies) full_->copy_block(c.src, c.dst);
  for (const kv::BlockCopy& c : batch.window_copies) {
    TM_CHECK(window_ != nullptr);
    window_->copy_block(c.src, c.dst);
  }

  const size_t n = batch.seqs.size();
  chunk_tokens_.resize(n);
  std::vector<model::SequenceChunk> chunks(n);
  std::vector<size_t> first_row(n + 1, 0);
  for (size_t i = 0; i < n; ++i) {
    const sched::ScheduledSeq& s = batch.seqs[i];
    chunk_tokens_[i] = s.seq->tokens(s.start_pos, s.num_tokens);
    model::SequenceChunk& c = chunks[i];
    c.tokens = chunk_tokens_[i];
    c.start_pos = s.start_pos;
    c.block_table = s.seq->blocks.blocks();
    c.window_table = s.seq->window_blocks.blocks();
    c.window_first = s.seq->window_blocks.first_block();
    c.logits = rows[i];
    first_row[i + 1] = first_row[i] + static_cast<size_t>(model::num_logit_rows(c));
  }
  model_.forward(chunks, model::KvPools{full_.get(), window_.get()}, logits_, pool_);
  return StepLogits(logits_, static_cast<size_t>(model_.config().n_vocab), std::move(first_row));
}

}  // namespace tokenmill::runner
