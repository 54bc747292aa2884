#include "tokenizer/bpe.h"

#include <gtest/gtest.h>

namespace tokenmill::tokenizer {
namespace {

// 0 a, 1 b, 2 c, 3 ab, 4 bc, 5 abc
const std::vector<std::string> kTexts = {"a", "b", "c", "ab", "bc", "abc"};

std::vector<int32_t> run(const std::vector<std::string>& merges, std::string_view word, bool ignore_merges = false) {
  Vocabulary vocab(kTexts, {}, {});
  BpeMerges ranks(merges);
  std::vector<int32_t> out;
  bpe_tokenize_word(vocab, ranks, word, ignore_merges, out);
  return out;
}

TEST(BpeMerges, RanksFollowLineOrder) {
  BpeMerges merges({"a b", "b c", "a b", "nospace", "ab c"});
  EXPECT_EQ(merges.rank("a", "b"), 0);  // the first occurrence counts
  EXPECT_EQ(merges.rank("b", "c"), 1);
  EXPECT_EQ(merges.rank("ab", "c"), 4);
  EXPECT_EQ(merges.rank("a", "c"), -1);
  EXPECT_EQ(merges.rank("nospace", ""), -1);
}

TEST(BpeMerges, SpaceInsideTheLeftPartNeverMatches) {
  BpeMerges merges({"a b c"});  // left "a", right "b c"
  EXPECT_EQ(merges.rank("a", "b c"), 0);
  EXPECT_EQ(merges.rank("a b", "c"), -1);
}

TEST(BpeTokenize, LowestRankMergesFirst) {
  // b+c first (rank 0), then a+bc (rank 2).
  EXPECT_EQ(run({"b c", "a b", "a bc"}, "abc"), (std::vector<int32_t>{5}));
  // a+b first, and no merge "ab c": ab | c.
  EXPECT_EQ(run({"a b", "b c"}, "abc"), (std::vector<int32_t>{3, 2}));
}

TEST(BpeTokenize, TiesGoToTheLeftmostPair) {
  Vocabulary vocab({"a", "aa"}, {}, {});
  BpeMerges merges({"a a"});
  std::vector<int32_t> out;
  bpe_tokenize_word(vocab, merges, "aaa", false, out);
  EXPECT_EQ(out, (std::vector<int32_t>{1, 0}));
}

TEST(BpeTokenize, IgnoreMergesTakesWholeWordTokens) {
  EXPECT_EQ(run({}, "abc"), (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(run({}, "abc", /*ignore_merges=*/true), (std::vector<int32_t>{5}));
}

TEST(BpeTokenize, PiecesOutsideTheVocabularyFallBackToSingleBytes) {
  // "d" is no token: it is dropped, as in llama.cpp.
  EXPECT_EQ(run({}, "adb"), (std::vector<int32_t>{0, 1}));
}

}  // namespace
}  // namespace tokenmill::tokenizer
