// The logits of one step, indexed by batch entry: the runner builds the
// row layout from the same chunks it hands to Model::forward, so the
// engine never recomputes it.
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

 private:
  std::span<const float> rows_;
  size_t n_vocab_ = 0;
  std::vector<size_t> first_row_;
};

}  // namespace tokenmill::runner
