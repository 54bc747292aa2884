// The output rules of SamplingParams through the whole Engine, on the tiny
// synthetic model: min_tokens holds back EOS, stop_token_ids end the output
// (without or with the token's text), allowed_token_ids and bad_words limit
// what is sampled, and prompt log-probabilities carry their rank.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "engine/engine.h"
#include "engine/test_util.h"

namespace tokenmill::engine {
namespace {

using testing::greedy_request;

GenerateRequest rules_request(const tokenizer::Tokenizer& tok, int64_t max_tokens) {
  GenerateRequest r = greedy_request(tok.encode("Once upon a time there was", true, false), max_tokens);
  r.sampling.ignore_eos = false;
  for (int32_t id = 3; id < 3 + 256; ++id) r.sampling.logit_bias.emplace_back(id, -INFINITY);  // no byte tokens
  return r;
}

TEST(EngineOutputRulesTest, MinTokensHoldsBackEndOfGeneration) {
  Engine engine(testing::tiny_config());
  const tokenizer::Tokenizer& tok = *engine.tokenizer();
  GenerateRequest r = rules_request(tok, 20);
  r.sampling.logit_bias.emplace_back(tok.eos_id(), 50.0f);  // EOS would end at once
  const GenerationResult at_once = engine.submit(r).wait();
  EXPECT_EQ(at_once.final.reason, FinishReason::kStop);
  EXPECT_TRUE(at_once.tokens.empty());
  r.sampling.min_tokens = 5;
  const GenerationResult held = engine.submit(r).wait();
  EXPECT_EQ(held.final.reason, FinishReason::kStop);
  ASSERT_EQ(held.tokens.size(), 5u);  // EOS ends it as soon as it may
  for (int32_t id : held.tokens) EXPECT_FALSE(tok.is_end_of_generation(id));
  EXPECT_EQ(held.final.usage.completion_tokens, 6);  // EOS is counted, not streamed
}

TEST(EngineOutputRulesTest, StopTokenIdsEndTheOutput) {
  Engine engine(testing::tiny_config());
  const tokenizer::Tokenizer& tok = *engine.tokenizer();
  GenerateRequest r = rules_request(tok, 24);
  r.sampling.ignore_eos = true;
  const GenerationResult full = engine.submit(r).wait();
  ASSERT_EQ(full.tokens.size(), 24u);
  const int32_t stop_id = full.tokens[6];
  const size_t at =
      static_cast<size_t>(std::find(full.tokens.begin(), full.tokens.end(), stop_id) - full.tokens.begin());
  r.sampling.stop_token_ids = {stop_id};
  const GenerationResult stopped = engine.submit(r).wait();
  EXPECT_EQ(stopped.final.reason, FinishReason::kStop);
  EXPECT_EQ(stopped.tokens, std::vector<int32_t>(full.tokens.begin(), full.tokens.begin() + at));
  EXPECT_EQ(stopped.final.usage.completion_tokens, static_cast<int64_t>(at) + 1);
  const std::string piece = tok.token_to_piece(stop_id);
  // include_stop_str_in_output keeps the stop token and its text.
  r.sampling.include_stop_str_in_output = true;
  const GenerationResult kept = engine.submit(r).wait();
  EXPECT_EQ(kept.final.reason, FinishReason::kStop);
  EXPECT_EQ(kept.tokens, std::vector<int32_t>(full.tokens.begin(), full.tokens.begin() + at + 1));
  EXPECT_EQ(kept.text, stopped.text + piece);
}

TEST(EngineOutputRulesTest, AllowedTokenIdsLimitEverySampledToken) {
  Engine engine(testing::tiny_config());
  const tokenizer::Tokenizer& tok = *engine.tokenizer();
  GenerateRequest r = rules_request(tok, 30);
  r.sampling.temperature = 1.0f;
  r.sampling.seed = 11;
  r.sampling.allowed_token_ids = {300, 301, 302, 400};
  const std::set<int32_t> allowed(r.sampling.allowed_token_ids.begin(), r.sampling.allowed_token_ids.end());
  const GenerationResult g = engine.submit(r).wait();
  ASSERT_EQ(g.tokens.size(), 30u);  // EOS is not allowed either
  for (int32_t id : g.tokens) EXPECT_TRUE(allowed.contains(id)) << id;
}

TEST(EngineOutputRulesTest, BadWordsAreNeverCompleted) {
  Engine engine(testing::tiny_config());
  const tokenizer::Tokenizer& tok = *engine.tokenizer();
  GenerateRequest r = rules_request(tok, 24);
  r.sampling.ignore_eos = true;
  const GenerationResult full = engine.submit(r).wait();
  ASSERT_EQ(full.tokens.size(), 24u);
  // A pair the greedy output contains, and a single token it outputs.
  const std::vector<int32_t> pair = {full.tokens[3], full.tokens[4]};
  const int32_t single = full.tokens[10];
  r.sampling.bad_words_ids = {pair, {single}};
  const GenerationResult g = engine.submit(r).wait();
  ASSERT_EQ(g.tokens.size(), 24u);
  EXPECT_EQ(std::count(g.tokens.begin(), g.tokens.end(), single), 0);
  for (size_t i = 0; i + 1 < g.tokens.size(); ++i)
    EXPECT_FALSE(g.tokens[i] == pair[0] && g.tokens[i + 1] == pair[1]) << "at " << i;
  // Greedy and unchanged up to the first place a ban applies.
  size_t first_ban = 0;
  while (full.tokens[first_ban] != single &&
         !(first_ban > 0 && full.tokens[first_ban - 1] == pair[0] && full.tokens[first_ban] == pair[1]))
    ++first_ban;
  ASSERT_LE(first_ban, 10u);
  EXPECT_EQ(std::vector<int32_t>(g.tokens.begin(), g.tokens.begin() + first_ban),
            std::vector<int32_t>(full.tokens.begin(), full.tokens.begin() + first_ban));
  EXPECT_NE(g.tokens[first_ban], full.tokens[first_ban]);
}

TEST(EngineOutputRulesTest, PromptLogprobsRankTheirToken) {
  Engine engine(testing::tiny_config());
  const tokenizer::Tokenizer& tok = *engine.tokenizer();
  GenerateRequest r = rules_request(tok, 1);
  r.prompt_logprobs = 3;
  const GenerationResult g = engine.submit(r).wait();
  ASSERT_EQ(g.prompt_logprobs.size(), r.prompt.size() - 1);
  for (size_t i = 0; i < g.prompt_logprobs.size(); ++i) {
    const TokenLogprob& lp = g.prompt_logprobs[i];
    const int32_t token = r.prompt[i + 1];
    ASSERT_GE(lp.rank, 1);
    // Rank k <= 3 is the token at top[k - 1]; a token outside the top 3 ranks
    // below every listed alternative.
    const auto it = std::find_if(lp.top.begin(), lp.top.end(), [&](const auto& t) { return t.first == token; });
    if (it != lp.top.end()) {
      EXPECT_EQ(lp.rank, static_cast<int32_t>(it - lp.top.begin()) + 1) << i;
    } else {
      EXPECT_GT(lp.rank, 3) << i;
      EXPECT_LT(lp.logprob, lp.top.back().second) << i;
    }
  }
}

}  // namespace
}  // namespace tokenmill::engine
