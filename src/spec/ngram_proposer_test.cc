#include "spec/ngram_proposer.h"

#include <gtest/gtest.h>

#include <vector>

#include "spec/spec_config.h"

namespace tokenmill::spec {
namespace {

using Tokens = std::vector<int32_t>;

TEST(NgramProposer, CopiesWhatFollowedTheLatestLongestMatch) {
  const NgramConfig c{4, 1, 3};
  // "5 6 7" occurred twice before; the later one is followed by 9 1 2.
  EXPECT_EQ(propose_ngram(Tokens{5, 6, 7, 8, 1, 5, 6, 7, 9, 1, 2, 3, 5, 6, 7}, 4, c), (Tokens{9, 1, 2, 3}));
  // The longest suffix wins over a later shorter one: "4 7" -> 1, although "7" -> 2 is later.
  EXPECT_EQ(propose_ngram(Tokens{4, 7, 1, 0, 7, 2, 4, 7}, 1, c), (Tokens{1}));
  // The draft stops where the tokens end.
  EXPECT_EQ(propose_ngram(Tokens{3, 4, 5, 3, 4}, 4, c), (Tokens{5, 3, 4}));
  EXPECT_EQ(propose_ngram(Tokens{3, 4, 5, 3, 4}, 2, c), (Tokens{5, 3}));
}

TEST(NgramProposer, PrefersAMatchThatLeavesAFullDraft) {
  const NgramConfig c{3, 1, 1};
  // A run: the match ending last leaves one token, an earlier one three.
  EXPECT_EQ(propose_ngram(Tokens{2, 2, 2, 2, 2}, 3, c), (Tokens{2, 2, 2}));
}

TEST(NgramProposer, NothingWithoutAnEarlierOccurrence) {
  const NgramConfig c{4, 2, 3};
  EXPECT_TRUE(propose_ngram(Tokens{1, 2, 3, 4}, 4, c).empty());
  EXPECT_TRUE(propose_ngram(Tokens{1, 2, 1}, 4, c).empty());  // only a 1-gram repeats; min is 2
  EXPECT_TRUE(propose_ngram(Tokens{}, 4, c).empty());
  EXPECT_TRUE(propose_ngram(Tokens{7}, 4, c).empty());
  EXPECT_TRUE(propose_ngram(Tokens{1, 2, 1, 2}, 0, c).empty());
  EXPECT_EQ(propose_ngram(Tokens{1, 2, 9, 1, 2}, 4, c), (Tokens{9, 1, 2}));
}

TEST(NgramProposer, BadSettingsAreRejected) {
  EXPECT_NO_THROW((NgramConfig{4, 1, 3}.validate()));
  EXPECT_THROW((NgramConfig{0, 1, 3}.validate()), Error);
  EXPECT_THROW((NgramConfig{kMaxDraft + 1, 1, 3}.validate()), Error);
  EXPECT_THROW((NgramConfig{4, 0, 3}.validate()), Error);
  EXPECT_THROW((NgramConfig{4, 3, 2}.validate()), Error);
  EXPECT_THROW((NgramConfig{4, 1, kMaxNgram + 1}.validate()), Error);
}

TEST(SpecConfig, MethodNamesRoundTripAndUnknownOnesAreRejected) {
  for (SpecMethod m : {SpecMethod::kNone, SpecMethod::kNgram}) EXPECT_EQ(parse_spec_method(spec_method_name(m)), m);
  EXPECT_THROW(parse_spec_method("eagle"), Error);
  SpecConfig c;
  c.ngram.max_draft = 0;
  EXPECT_NO_THROW(c.validate());  // plain decoding ignores the n-gram settings
  c.method = SpecMethod::kNgram;
  EXPECT_THROW(c.validate(), Error);
}

}  // namespace
}  // namespace tokenmill::spec
