// The logits of one step (and the final hidden states of the entries that
// asked for them), indexed by batch entry: the runner builds the row layout
// from the same chunks it hands to Model::forward, so the engine never
// recomputes it.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "util/check.h"

namespace tokenmill::runner {

class StepLogits {
 public:
  StepLogits() = default;
  // rows: [sum of rows per entry, n_vocab]; first_row: [entries + 1], entry
  // i owns rows [first_row[i], first_row[i + 1]).
  StepLogits(std::span<const float> rows, size_t n_vocab, std::vector<size_t> first_row)
      : rows_(rows), n_vocab_(n_vocab), first_row_(std::move(first_row)) {}

  size_t num_entries() const { return first_row_.empty() ? 0 : first_row_.size() - 1; }
  // An entry's rows: its every token's for LogitRows::kAll, one for kLast,
  // none for kNone.
  size_t num_rows(size_t entry) const { return first_row_.at(entry + 1) - first_row_.at(entry); }
  // Row j of an entry: the logits that predict the token after its j-th
  // token (kAll), or after its last (kLast, j = 0). [n_vocab]
  std::span<const float> row(size_t entry, size_t j) const {
    TM_CHECK(j < num_rows(entry));
    return rows_.subspan((first_row_[entry] + j) * n_vocab_, n_vocab_);
  }
  // The entry's last row: the one a sampling entry samples from.
  std::span<const float> last_row(size_t entry) const { return row(entry, num_rows(entry) - 1); }

  // The step's final hidden states (Model::forward's `hidden`): rows
  // [sum of hidden rows per entry, n_embd]; first_hidden: [entries + 1].
  void set_hidden(std::span<const float> rows, size_t n_embd, std::vector<size_t> first_hidden) {
    hidden_ = rows;
    n_embd_ = n_embd;
    first_hidden_ = std::move(first_hidden);
  }
  // An entry's hidden states, one row per token of its chunk when the step
  // asked for them, else empty: [num_tokens, n_embd].
  std::span<const float> hidden(size_t entry) const {
    if (first_hidden_.empty()) return {};
    const size_t first = first_hidden_.at(entry);
    return hidden_.subspan(first * n_embd_, (first_hidden_.at(entry + 1) - first) * n_embd_);
  }

 private:
  std::span<const float> rows_;
  size_t n_vocab_ = 0;
  std::vector<size_t> first_row_;
  std::span<const float> hidden_;
  size_t n_embd_ = 0;
  std::vector<size_t> first_hidden_;  // empty: no entry asked for hidden states
};

}  // namespace tokenmill::runner
