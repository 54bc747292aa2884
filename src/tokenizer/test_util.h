// Helpers for the tokenizer tests: small hand-built vocabularies and the
// location of the shared conformance data.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"
#include "util/test_dependency.h"

namespace tokenmill::tokenizer::testing {

using ::tokenmill::testing::shared_dir;

// A SentencePiece vocabulary laid out like Llama's: 0 <unk>, 1 <s>, 2 </s>,
// 3..258 the byte tokens <0x00>..<0xFF>, then `normal` (text, score) pairs
// from id 259 on.
inline TokenizerSpec spm_spec(const std::vector<std::pair<std::string, float>>& normal) {
  TokenizerSpec spec;
  spec.kind = TokenizerKind::kSpm;
  spec.tokens = {"<unk>", "<s>", "</s>"};
  spec.types = {TokenType::kUnknown, TokenType::kControl, TokenType::kControl};
  for (int b = 0; b < 256; ++b) {
    char text[8];
    std::snprintf(text, sizeof text, "<0x%02X>", b);
    spec.tokens.push_back(text);
    spec.types.push_back(TokenType::kByte);
  }
  spec.scores.assign(spec.tokens.size(), 0.0f);
  for (const auto& [text, score] : normal) {
    spec.tokens.push_back(text);
    spec.scores.push_back(score);
    spec.types.push_back(TokenType::kNormal);
  }
  return spec;
}

inline constexpr int32_t kFirstNormal = 259;
inline int32_t byte_token(uint8_t b) { return 3 + b; }

}  // namespace tokenmill::tokenizer::testing
