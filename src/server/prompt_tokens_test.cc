// bad_words as token sequences and prompt truncation (truncate_prompt_tokens,
// n_keep) on hand-built vocabularies and plain id lists.
#include "server/prompt_tokens.h"

#include <gtest/gtest.h>

#include <numeric>

#include "server/api_error.h"
#include "tokenizer/test_util.h"

namespace tokenmill::server {
namespace {

std::vector<int32_t> iota_prompt(int n) {
  std::vector<int32_t> p(static_cast<size_t>(n));
  std::iota(p.begin(), p.end(), 0);
  return p;
}

TEST(FitPrompt, TruncatePromptTokensKeepsTheLastK) {
  SamplingRequest r;
  r.truncate_prompt_tokens = 3;
  std::vector<int32_t> p = iota_prompt(10);
  fit_prompt(p, r, {100, 5});
  EXPECT_EQ(p, (std::vector<int32_t>{7, 8, 9}));
  r.truncate_prompt_tokens = -1;  // the context length
  p = iota_prompt(10);
  fit_prompt(p, r, {4, 1});
  EXPECT_EQ(p, (std::vector<int32_t>{6, 7, 8, 9}));
  p = iota_prompt(2);
  r.truncate_prompt_tokens = 5;  // shorter already: unchanged
  fit_prompt(p, r, {100, 5});
  EXPECT_EQ(p, iota_prompt(2));
}

TEST(FitPrompt, NKeepDropsFromTheMiddleOnlyWhenNeeded) {
  SamplingRequest r;
  r.n_keep = 2;
  std::vector<int32_t> p = iota_prompt(10);
  fit_prompt(p, r, {16, 6});  // 10 + 6 fits in 16: unchanged
  EXPECT_EQ(p, iota_prompt(10));
  fit_prompt(p, r, {12, 6});  // must shrink to 6: first 2, last 4
  EXPECT_EQ(p, (std::vector<int32_t>{0, 1, 6, 7, 8, 9}));
  // Without max_tokens a prompt that fills the context keeps half of it.
  p = iota_prompt(10);
  fit_prompt(p, r, {10, std::nullopt});
  EXPECT_EQ(p, (std::vector<int32_t>{0, 1, 7, 8, 9}));
  p = iota_prompt(9);
  fit_prompt(p, r, {10, std::nullopt});
  EXPECT_EQ(p, iota_prompt(9));
}

TEST(FitPrompt, WithoutNKeepALongPromptIsLeftForTheEngine) {
  SamplingRequest r;
  std::vector<int32_t> p = iota_prompt(10);
  fit_prompt(p, r, {8, 4});
  EXPECT_EQ(p.size(), 10u);
  r.n_keep = -1;  // keep everything
  fit_prompt(p, r, {8, 4});
  EXPECT_EQ(p.size(), 10u);
}

TEST(FitPrompt, NKeepThatLeavesNoRoomIs400) {
  SamplingRequest r;
  r.n_keep = 6;
  std::vector<int32_t> p = iota_prompt(10);
  try {
    fit_prompt(p, r, {12, 6});
    ADD_FAILURE() << "no error";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    EXPECT_EQ(e.param().value_or(""), "n_keep");
  }
}

TEST(BadWords, BothSpellingsWhenTheyAreWordTokens) {
  // Byte-level style: no prefix space, so "bad" and " bad" are different tokens.
  tokenizer::TokenizerSpec spec = tokenizer::testing::spm_spec({{"\xE2\x96\x81", -1.0f},
                                                                {"b", -1.0f},
                                                                {"a", -1.0f},
                                                                {"d", -1.0f},
                                                                {"ba", -2.0f},
                                                                {"bad", 0.0f},
                                                                {"\xE2\x96\x81"
                                                                 "b",
                                                                 -2.0f},
                                                                {"\xE2\x96\x81"
                                                                 "ba",
                                                                 -2.0f},
                                                                {"\xE2\x96\x81"
                                                                 "bad",
                                                                 0.0f}});
  spec.add_space_prefix = false;
  const tokenizer::Tokenizer tok = tokenizer::Tokenizer::from_spec(spec);
  const int32_t bad = *tok.find_token("bad");
  const int32_t spaced = *tok.find_token(
      "\xE2\x96\x81"
      "bad");
  const std::vector<std::string> words = {"bad", " bad"};  // the second is the same word
  EXPECT_EQ(bad_words_token_ids(tok, words), (std::vector<std::vector<int32_t>>{{bad}, {spaced}}));
}

TEST(BadWords, PrefixSpaceVocabulariesKeepOneSpelling) {
  // SentencePiece with a prefix space: "bad" already encodes as "▁bad", and
  // " bad" as a lone "▁" before it, which is not another spelling of the word.
  const tokenizer::Tokenizer tok =
      tokenizer::Tokenizer::from_spec(tokenizer::testing::spm_spec({{"\xE2\x96\x81", -1.0f},
                                                                    {"b", -1.0f},
                                                                    {"a", -1.0f},
                                                                    {"d", -1.0f},
                                                                    {"\xE2\x96\x81"
                                                                     "b",
                                                                     -2.0f},
                                                                    {"\xE2\x96\x81"
                                                                     "ba",
                                                                     -2.0f},
                                                                    {"\xE2\x96\x81"
                                                                     "bad",
                                                                     0.0f},
                                                                    {"x", -1.0f}}));
  const int32_t spaced = *tok.find_token(
      "\xE2\x96\x81"
      "bad");
  const std::vector<std::string> words = {"bad"};
  EXPECT_EQ(bad_words_token_ids(tok, words), (std::vector<std::vector<int32_t>>{{spaced}}));
  // A word of several tokens stays one sequence.
  const std::vector<std::string> two = {"bad x"};
  const std::vector<std::vector<int32_t>> seqs = bad_words_token_ids(tok, two);
  ASSERT_EQ(seqs.size(), 1u);
  EXPECT_GT(seqs[0].size(), 1u);
  EXPECT_EQ(seqs[0].front(), spaced);
}

}  // namespace
}  // namespace tokenmill::server
