// TokenFilter: allowed_token_ids, bad_words and min_tokens as bans on a
// mask of allowed tokens, and the Sampler honouring that mask.
#include "sample/token_filter.h"

#include <gtest/gtest.h>

#include <vector>

#include "sample/sampler.h"

namespace tokenmill::sample {
namespace {

constexpr int32_t kFilterVocab = 70;  // three mask words, the last one partial

std::vector<uint32_t> all_allowed() { return std::vector<uint32_t>((kFilterVocab + 31) / 32, ~0u); }

std::vector<int32_t> allowed_ids(const std::vector<uint32_t>& mask) {
  std::vector<int32_t> ids;
  for (int32_t id = 0; id < kFilterVocab; ++id)
    if (mask_bit(mask, id)) ids.push_back(id);
  return ids;
}

TEST(TokenFilter, InactiveWithoutRules) {
  const TokenFilter f(SamplingParams{}, std::vector<int32_t>{2}, kFilterVocab);
  EXPECT_FALSE(f.active());
  std::vector<uint32_t> mask = all_allowed();
  f.apply({}, mask);
  EXPECT_EQ(allowed_ids(mask).size(), static_cast<size_t>(kFilterVocab));
}

TEST(TokenFilter, AllowedTokenIdsAreTheOnlyOnes) {
  SamplingParams p;
  p.allowed_token_ids = {5, 33, 69, 5};
  const TokenFilter f(p, std::vector<int32_t>{2}, kFilterVocab);
  EXPECT_TRUE(f.active());
  std::vector<uint32_t> mask = all_allowed();
  f.apply(std::vector<int32_t>{1, 2, 3}, mask);
  EXPECT_EQ(allowed_ids(mask), (std::vector<int32_t>{5, 33, 69}));
}

TEST(TokenFilter, MinTokensBansEndAndStopTokensUntilReached) {
  SamplingParams p;
  p.min_tokens = 3;
  p.stop_token_ids = {40};
  const TokenFilter f(p, std::vector<int32_t>{2, 7}, kFilterVocab);
  for (size_t out = 0; out <= 4; ++out) {
    std::vector<uint32_t> mask = all_allowed();
    f.apply(std::vector<int32_t>(out, 11), mask);
    const bool banned = out < 3;
    EXPECT_EQ(mask_bit(mask, 2), !banned) << out;
    EXPECT_EQ(mask_bit(mask, 7), !banned) << out;
    EXPECT_EQ(mask_bit(mask, 40), !banned) << out;
    EXPECT_TRUE(mask_bit(mask, 11));
    EXPECT_EQ(f.active_after(out), banned);
  }
}

TEST(TokenFilter, BadWordsBanTheirLastTokenAfterTheirPrefix) {
  SamplingParams p;
  p.bad_words_ids = {{9}, {20, 21, 22}};
  const TokenFilter f(p, {}, kFilterVocab);
  auto banned_after = [&](std::vector<int32_t> output) {
    std::vector<uint32_t> mask = all_allowed();
    f.apply(output, mask);
    std::vector<int32_t> banned;
    for (int32_t id = 0; id < kFilterVocab; ++id)
      if (!mask_bit(mask, id)) banned.push_back(id);
    return banned;
  };
  EXPECT_EQ(banned_after({}), (std::vector<int32_t>{9}));  // a one-token word: always
  EXPECT_EQ(banned_after({20}), (std::vector<int32_t>{9}));
  EXPECT_EQ(banned_after({5, 20, 21}), (std::vector<int32_t>{9, 22}));
  EXPECT_EQ(banned_after({20, 21, 5}), (std::vector<int32_t>{9}));
}

TEST(TokenFilter, TheSamplerNeverDrawsABannedToken) {
  SamplingParams p;
  p.allowed_token_ids = {3, 4};
  p.temperature = 1.0f;
  p.seed = 7;
  p.logit_bias = {{10, 100.0f}};  // however strongly favoured, 10 is not allowed
  const TokenFilter f(p, {}, kFilterVocab);
  std::vector<uint32_t> mask = all_allowed();
  f.apply({}, mask);
  Sampler s(p, kFilterVocab);
  SamplerScratch scratch;
  const std::vector<float> logits(kFilterVocab, 0.0f);
  for (int i = 0; i < 200; ++i) {
    const int32_t id = s.sample(logits, {}, scratch, mask);
    EXPECT_TRUE(id == 3 || id == 4) << id;
  }
}

}  // namespace
}  // namespace tokenmill::sample
