// Prompt log-probabilities (GenerateRequest::prompt_logprobs): every prompt
// token's log-probability given its prefix, checked against an independent
// single-sequence forward pass over the whole prompt, across prefill
// chunks, with the prefix cache warm, with max_tokens 0, and alongside
// generation.
#include <gtest/gtest.h>

#include <cmath>

#include "engine/engine.h"
#include "engine/test_util.h"
#include "sample/logprobs.h"

namespace tokenmill::engine {
namespace {

using testing::greedy_request;
using testing::random_prompt;
using testing::tiny_config;
using testing::tiny_model_path;

// log p(prompt[i] | prompt[:i]) for i = 1..n-1, from one forward pass that
// returns every position's logits.
std::vector<double> reference_prompt_logprobs(const std::vector<int32_t>& prompt) {
  std::unique_ptr<model::Model> m = model::Model::load(tiny_model_path());
  ThreadPool pool(1);
  model::SingleSequence seq(*m, static_cast<int64_t>(prompt.size()), kv::KvDtype::F16);
  std::vector<float> logits;
  seq.forward(prompt, /*all_logits=*/true, logits, pool);
  const size_t vocab = static_cast<size_t>(m->config().n_vocab);
  std::vector<double> out;
  for (size_t i = 1; i < prompt.size(); ++i) {
    const std::span<const float> row(logits.data() + (i - 1) * vocab, vocab);
    out.push_back(sample::logprob_of(row, prompt[i]));
  }
  return out;
}

GenerateRequest scoring_request(std::vector<int32_t> prompt, int64_t max_tokens, int k) {
  GenerateRequest r = greedy_request(std::move(prompt), max_tokens);
  r.prompt_logprobs = k;
  return r;
}

void expect_matches(const std::vector<TokenLogprob>& got, const std::vector<double>& want, int k) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_NEAR(got[i].logprob, want[i], 1e-3) << "prompt token " << i + 1;
    EXPECT_EQ(got[i].top.size(), static_cast<size_t>(k));
    if (k > 0) {
      EXPECT_GE(got[i].top[0].second + 1e-6, got[i].logprob);  // the best is at least the actual token
    }
  }
}

TEST(PromptLogprobsTest, ScoresThePromptAcrossChunksWithoutGenerating) {
  const std::vector<int32_t> prompt = random_prompt(21, 70);  // 3 prefill chunks of 32
  const std::vector<double> want = reference_prompt_logprobs(prompt);
  Engine engine(tiny_config());
  const GenerationResult r = engine.submit(scoring_request(prompt, 0, 2)).wait();
  EXPECT_EQ(r.final.reason, FinishReason::kLength);
  EXPECT_TRUE(r.tokens.empty());
  EXPECT_EQ(r.final.usage.completion_tokens, 0);
  EXPECT_EQ(r.final.usage.prompt_tokens, 70);
  expect_matches(r.prompt_logprobs, want, 2);
  EXPECT_EQ(engine.metrics().kv_blocks_used, 0);
}

TEST(PromptLogprobsTest, AWarmPrefixCacheDoesNotSkipScoredPositions) {
  const std::vector<int32_t> prompt = random_prompt(22, 50);
  const std::vector<double> want = reference_prompt_logprobs(prompt);
  Engine engine(tiny_config());
  EXPECT_EQ(engine.submit(greedy_request(prompt, 2)).wait().final.reason, FinishReason::kLength);  // warms the cache
  const GenerationResult r = engine.submit(scoring_request(prompt, 0, 0)).wait();
  EXPECT_EQ(r.final.usage.cached_prompt_tokens, 0);
  expect_matches(r.prompt_logprobs, want, 0);
}

TEST(PromptLogprobsTest, GenerationAfterScoringIsUnchanged) {
  const std::vector<int32_t> prompt = random_prompt(23, 40);
  const std::vector<double> want = reference_prompt_logprobs(prompt);
  std::unique_ptr<model::Model> m = model::Model::load(tiny_model_path());
  const std::vector<int32_t> expected = testing::reference_greedy(*m, prompt, 6);
  Engine engine(tiny_config());
  // Another request in the same batch keeps its kLast rows.
  RequestHandle other = engine.submit(greedy_request(random_prompt(24, 30), 6));
  RequestHandle scored = engine.submit(scoring_request(prompt, 6, 1));
  const GenerationResult r = scored.wait();
  EXPECT_EQ(r.tokens, expected);
  expect_matches(r.prompt_logprobs, want, 1);
  EXPECT_EQ(other.wait().tokens, testing::reference_greedy(*m, random_prompt(24, 30), 6));
}

TEST(PromptLogprobsTest, MaxTokensZeroNeedsPromptLogprobs) {
  Engine engine(tiny_config());
  const FinalEvent f = engine.submit(greedy_request({1, 2, 3}, 0)).wait().final;
  EXPECT_EQ(f.reject, RejectReason::kInvalid);
  GenerateRequest bad = scoring_request({1, 2, 3}, 1, kMaxTopLogprobs + 1);
  EXPECT_EQ(engine.submit(bad).wait().final.reject, RejectReason::kInvalid);
  // A one-token prompt has nothing to score.
  const GenerationResult one = engine.submit(scoring_request({5}, 0, 1)).wait();
  EXPECT_EQ(one.final.reason, FinishReason::kLength);
  EXPECT_TRUE(one.prompt_logprobs.empty());
}

}  // namespace
}  // namespace tokenmill::engine
