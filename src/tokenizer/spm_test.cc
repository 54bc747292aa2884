#include "tokenizer/spm.h"

#include <gtest/gtest.h>

#include "tokenizer/test_util.h"
#include "tokenizer/unicode.h"

namespace tokenmill::tokenizer {
namespace {

using testing::byte_token;
using testing::kFirstNormal;
using testing::spm_spec;

std::vector<int32_t> run(const TokenizerSpec& spec, std::string_view text) {
  Vocabulary vocab(spec.tokens, spec.scores, spec.types);
  std::vector<int32_t> out;
  spm_tokenize(vocab, spm_byte_tokens(vocab, 0), text, out);
  return out;
}

TEST(SpmTokenize, HigherScoreMergesFirst) {
  // "abc": pairs "ab" (-0.5) and "bc" (-0.1); "bc" wins, and "a"+"bc" is no
  // token, so the result is a | bc.
  auto spec = spm_spec({{"a", -2}, {"b", -3}, {"c", -4}, {"ab", -0.5f}, {"bc", -0.1f}});
  EXPECT_EQ(run(spec, "abc"), (std::vector<int32_t>{kFirstNormal, kFirstNormal + 4}));
  // With "ab" ahead instead: ab | c.
  spec = spm_spec({{"a", -2}, {"b", -3}, {"c", -4}, {"ab", -0.1f}, {"bc", -0.5f}});
  EXPECT_EQ(run(spec, "abc"), (std::vector<int32_t>{kFirstNormal + 3, kFirstNormal + 2}));
}

TEST(SpmTokenize, MergesRepeatUntilNoPairIsAToken) {
  auto spec = spm_spec({{"a", -1}, {"b", -1}, {"c", -1}, {"ab", -1}, {"abc", -1}});
  EXPECT_EQ(run(spec, "abc"), (std::vector<int32_t>{kFirstNormal + 4}));
}

TEST(SpmTokenize, TiesGoToTheLeftmostPair) {
  auto spec = spm_spec({{"a", -1}, {"aa", -1}});
  EXPECT_EQ(run(spec, "aaa"), (std::vector<int32_t>{kFirstNormal + 1, kFirstNormal}));
}

TEST(SpmTokenize, UnknownCharactersFallBackToBytes) {
  auto spec = spm_spec({{"a", -1}});
  EXPECT_EQ(run(spec, "a\xC3\xA9"), (std::vector<int32_t>{kFirstNormal, byte_token(0xC3), byte_token(0xA9)}));
}

TEST(SpmTokenize, BytesThatAreNotUtf8StandAlone) {
  // 0xFF is no lead byte: it must not swallow the "▁" after it.
  auto spec =
      spm_spec({{"\xE2\x96\x81"
                 "a",
                 -1}});
  EXPECT_EQ(run(spec,
                "\xFF\xE2\x96\x81"
                "a"),
            (std::vector<int32_t>{byte_token(0xFF), kFirstNormal}));
}

TEST(SpmTokenize, WithoutByteTokensUnknownBecomesUnk) {
  Vocabulary vocab({"<unk>", "a"}, {}, {TokenType::kUnknown, TokenType::kNormal});
  std::vector<int32_t> out;
  spm_tokenize(vocab, spm_byte_tokens(vocab, 0), "ab", out);
  EXPECT_EQ(out, (std::vector<int32_t>{1, 0}));
}

TEST(SpmTokenize, EmptyTextGivesNothing) {
  auto spec = spm_spec({{"a", -1}});
  EXPECT_TRUE(run(spec, "").empty());
}

}  // namespace
}  // namespace tokenmill::tokenizer
