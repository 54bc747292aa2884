#include "tokenizer/incremental_detokenizer.h"

#include "tokenizer/unicode.h"

namespace tokenmill::tokenizer {

IncrementalDetokenizer::IncrementalDetokenizer(const Tokenizer& tokenizer, bool skip_special, bool at_text_start)
    : tokenizer_(&tokenizer),
      skip_special_(skip_special),
      strip_leading_space_(at_text_start && tokenizer.strips_leading_space()) {}

std::string IncrementalDetokenizer::push(int32_t id) {
  std::string piece = tokenizer_->token_to_piece(id, !skip_special_);
  if (strip_leading_space_ && !piece.empty()) {  // the same rule as decode()
    if (piece[0] == ' ') piece.erase(0, 1);
    strip_leading_space_ = false;
  }
  pending_ += piece;
  std::string out;
  size_t used = append_complete_utf8(pending_, /*at_end=*/false, out);
  pending_.erase(0, used);
  return out;
}

std::string IncrementalDetokenizer::flush() {
  std::string out;
  append_complete_utf8(pending_, /*at_end=*/true, out);
  pending_.clear();
  return out;
}

}  // namespace tokenmill::tokenizer
