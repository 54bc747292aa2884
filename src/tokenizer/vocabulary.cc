#include "tokenizer/vocabulary.h"

#include "util/check.h"

namespace tokenmill::tokenizer {

Vocabulary::Vocabulary(std::vector<std::string> texts, std::vector<float> scores, std::vector<TokenType> types)
    : texts_(std::move(texts)), scores_(std::move(scores)), types_(std::move(types)) {
  TM_CHECK(scores_.empty() || scores_.size() == texts_.size());
  if (types_.empty()) types_.assign(texts_.size(), TokenType::kNormal);
  TM_CHECK(types_.size() == texts_.size());
  ids_.reserve(texts_.size());
  for (size_t i = 0; i < texts_.size(); ++i) ids_[texts_[i]] = static_cast<int32_t>(i);
}

}  // namespace tokenmill::tokenizer
