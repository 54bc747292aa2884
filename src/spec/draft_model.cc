#include "spec/draft_model.h"

#include <algorithm>

#include "util/check.h"
#include "util/error.h"

namespace tokenmill::spec {

void check_same_vocabulary(const model::Model& target, const model::Model& draft) {
  const int64_t nt = target.config().n_vocab, nd = draft.config().n_vocab;
  if (nt != nd) fail("the draft model has {} logits per token, the target {}: they must share a vocabulary", nd, nt);
  const bool tt = tokenizer::Tokenizer::present_in(target.file());
  const bool td = tokenizer::Tokenizer::present_in(draft.file());
  if (!tt && !td) return;
  if (tt != td)
    fail("only the {} model has a tokenizer: a shared vocabulary cannot be checked", tt ? "target" : "draft");
  const tokenizer::Tokenizer a = tokenizer::Tokenizer::from_gguf(target.file());
  const tokenizer::Tokenizer b = tokenizer::Tokenizer::from_gguf(draft.file());
  if (a.vocab_size() != b.vocab_size())
    fail("the draft model's tokenizer has {} tokens, the target's {}: they must share a vocabulary", b.vocab_size(),
         a.vocab_size());
  for (int32_t id = 0; id < a.vocab_size(); ++id) {
    if (a.token_text(id) != b.token_text(id))
      fail("token {} is '{}' in the draft model's tokenizer but '{}' in the target's: they must share a vocabulary", id,
           b.token_text(id), a.token_text(id));
  }
}

DraftModel::DraftModel(const std::string& path, const model::Model& target, int64_t block_size, kv::KvDtype dtype,
                       int64_t kv_bytes, ThreadPool& pool)
    : block_size_(static_cast<int32_t>(block_size)), pool_(pool) {
  try {
    model_ = model::Model::load(path);
  } catch (const Error& e) {
    fail("draft model {}: {}", path, e.what());
  }
  check_same_vocabulary(target, *model_);
  const kv::KvGeometry geometry = model_->kv_geometry(block_size, dtype);
  const int64_t blocks = std::max<int64_t>(1, kv::PagedKvStorage::blocks_for_budget(geometry, kv_bytes));
  storage_ = std::make_unique<kv::PagedKvStorage>(geometry, blocks);
  allocator_ = std::make_unique<kv::BlockAllocator>(static_cast<int32_t>(blocks));
  if (kv::kv_keys_channel_scaled(dtype)) model_->prepare_key_scales(pool_);
}

DraftModel::~DraftModel() {
  seqs_.clear();  // the tables give their blocks back to the allocator first
}

std::optional<std::span<const int32_t>> DraftModel::prepare(uint64_t id, std::span<const int32_t> tokens,
                                                            int64_t num_draft) {
  TM_CHECK(!tokens.empty() && num_draft >= 1);
  auto [it, added] = seqs_.try_emplace(id, SeqKv{kv::BlockTable(*allocator_, block_size_), {}});
  SeqKv& s = it->second;
  const size_t limit = std::min(s.fed.size(), tokens.size() - 1);  // the last token is always fed
  size_t keep = 0;
  while (keep < limit && s.fed[keep] == tokens[keep]) ++keep;
  s.fed.resize(keep);
  // Slots for the tokens fed in this step's passes: the rest of `tokens`,
  // then num_draft - 1 draft tokens (the last draft token is never fed).
  const int64_t need = static_cast<int64_t>(tokens.size()) + num_draft - 1;
  if (s.table.num_tokens() > need) s.table.truncate(std::max<int64_t>(need, static_cast<int64_t>(keep)));
  if (s.table.num_tokens() < need && !s.table.append_slots(need - s.table.num_tokens(), nullptr)) return std::nullopt;
  return tokens.subspan(keep);
}

runner::StepLogits DraftModel::run(std::span<const Feed> feeds) {
  std::vector<model::ChunkTable> tables(feeds.size());
  std::vector<model::SequenceChunk> chunks(feeds.size());
  std::vector<size_t> first_row(feeds.size() + 1, 0);
  for (size_t i = 0; i < feeds.size(); ++i) {
    SeqKv& s = seqs_.at(feeds[i].id);
    TM_CHECK(static_cast<int64_t>(s.fed.size() + feeds[i].tokens.size()) <= s.table.num_tokens());
    tables[i] = model::ChunkTable{s.table.blocks(), 0};
    chunks[i] = model::SequenceChunk{feeds[i].tokens, static_cast<int64_t>(s.fed.size()),
                                     std::span<const model::ChunkTable>(&tables[i], 1), model::LogitRows::kLast};
    first_row[i + 1] = i + 1;
  }
  model_->forward(chunks, *storage_, logits_, pool_);
  for (const Feed& f : feeds) {
    SeqKv& s = seqs_.at(f.id);
    s.fed.insert(s.fed.end(), f.tokens.begin(), f.tokens.end());
  }
  return runner::StepLogits(logits_, static_cast<size_t>(model_->config().n_vocab), std::move(first_row));
}

void DraftModel::release(uint64_t id) { seqs_.erase(id); }

}  // namespace tokenmill::spec
