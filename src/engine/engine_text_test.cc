// Text-level behaviour of the Engine: streamed pieces, stop strings, EOS and
// log-probabilities, on the tiny synthetic model with its built-in
// SentencePiece vocabulary.
#include <gtest/gtest.h>

#include <cmath>

#include "engine/engine.h"
#include "engine/test_util.h"
#include "sample/logprobs.h"

namespace tokenmill::engine {
namespace {

using testing::greedy_request;

// Greedy, and never a byte token (ids 3..258), so that every output piece
// is whole UTF-8 and Tokenizer::decode is an exact independent reference.
GenerateRequest text_request(const tokenizer::Tokenizer& tok, const std::string& text, int64_t max_tokens) {
  GenerateRequest r = greedy_request(tok.encode(text, /*add_special=*/true, /*parse_special=*/false), max_tokens);
  for (int32_t id = 3; id < 3 + 256; ++id) r.sampling.logit_bias.emplace_back(id, -INFINITY);
  return r;
}

// The text the output adds to the prompt: decode(prompt + output) minus decode(prompt).
std::string continuation(const tokenizer::Tokenizer& tok, const std::vector<int32_t>& prompt,
                         const std::vector<int32_t>& output) {
  std::vector<int32_t> all = prompt;
  all.insert(all.end(), output.begin(), output.end());
  const std::string head = tok.decode(prompt, true);
  const std::string whole = tok.decode(all, true);
  EXPECT_EQ(whole.substr(0, head.size()), head);
  return whole.substr(head.size());
}

TEST(EngineTextTest, StreamedPiecesConcatenateToTheDecodedOutput) {
  Engine engine(testing::tiny_config());
  const tokenizer::Tokenizer& tok = *engine.tokenizer();
  for (const char* prompt : {"Once upon a time there was a little dog", "The cat", "Hello world and"}) {
    const GenerateRequest r = text_request(tok, prompt, 30);
    RequestHandle h = engine.submit(r);
    std::string streamed;
    std::vector<int32_t> ids;
    while (std::optional<StreamEvent> e = h.next()) {
      if (e->token) {
        streamed += e->token->text;
        ids.push_back(e->token->token);
        EXPECT_FALSE(e->token->logprob.has_value());  // not asked for
      } else {
        streamed += e->final->text;
        EXPECT_EQ(e->final->reason, FinishReason::kLength);
      }
    }
    ASSERT_EQ(ids.size(), 30u);
    EXPECT_EQ(streamed, continuation(tok, r.prompt, ids)) << prompt;
    EXPECT_FALSE(streamed.empty());
  }
}

TEST(EngineTextTest, StopStringEndsGenerationWithReasonStop) {
  Engine engine(testing::tiny_config());
  const tokenizer::Tokenizer& tok = *engine.tokenizer();
  GenerateRequest r = text_request(tok, "Once upon a time there was a little dog", 40);
  const GenerationResult full = engine.submit(r).wait();
  ASSERT_GE(full.text.size(), 12u);
  // A stop string taken from the middle of the unconstrained output.
  const std::string stop = full.text.substr(full.text.size() / 2, 3);
  const size_t at = full.text.find(stop);
  r.sampling.stop = {stop};
  const GenerationResult stopped = engine.submit(r).wait();
  EXPECT_EQ(stopped.final.reason, FinishReason::kStop);
  EXPECT_EQ(stopped.text, full.text.substr(0, at)) << "stop string '" << stop << "'";
  // Generation ended on the token that completed the stop string.
  EXPECT_LT(stopped.tokens.size(), full.tokens.size());
  EXPECT_EQ(stopped.tokens, std::vector<int32_t>(full.tokens.begin(), full.tokens.begin() + stopped.tokens.size()));
  ASSERT_FALSE(stopped.tokens.empty());
  EXPECT_NE(continuation(tok, r.prompt, stopped.tokens).find(stop), std::string::npos);
  const std::vector<int32_t> before_last(stopped.tokens.begin(), stopped.tokens.end() - 1);
  EXPECT_EQ(continuation(tok, r.prompt, before_last).find(stop), std::string::npos);
}

TEST(EngineTextTest, EosEndsGenerationUnlessIgnored) {
  Engine engine(testing::tiny_config());
  const int32_t eos = engine.tokenizer()->eos_id();
  ASSERT_EQ(eos, 2);
  GenerateRequest r = greedy_request({1, 400, 401}, 10);
  r.sampling.ignore_eos = false;
  r.sampling.logit_bias = {{eos, 1000.0f}};  // EOS is the argmax
  const GenerationResult ended = engine.submit(r).wait();
  EXPECT_EQ(ended.final.reason, FinishReason::kStop);
  EXPECT_TRUE(ended.tokens.empty());                  // EOS is not streamed ...
  EXPECT_EQ(ended.final.usage.completion_tokens, 1);  // ... but counted
  EXPECT_EQ(ended.text, "");

  r.sampling.ignore_eos = true;
  const GenerationResult ignored = engine.submit(r).wait();
  EXPECT_EQ(ignored.final.reason, FinishReason::kLength);
  EXPECT_EQ(ignored.tokens, std::vector<int32_t>(10, eos));
  EXPECT_EQ(ignored.text, "");  // a control token has no text
}

TEST(EngineTextTest, LogprobsMatchTheReferenceSoftmax) {
  Engine engine(testing::tiny_config());
  GenerateRequest r = greedy_request(testing::random_prompt(9, 12), 3);
  r.logprobs = true;
  r.top_logprobs = 4;
  const GenerationResult result = engine.submit(r).wait();
  ASSERT_EQ(result.logprobs.size(), 3u);

  // The first token's distribution, computed without the engine.
  std::unique_ptr<model::Model> m = model::Model::load(testing::tiny_model_path());
  ThreadPool pool(1);
  model::SingleSequence seq(*m, 16, kv::KvDtype::F16);
  std::vector<float> logits;
  seq.forward(r.prompt, false, logits, pool);
  const TokenLogprob& first = result.logprobs[0];
  EXPECT_NEAR(first.logprob, sample::logprob_of(logits, result.tokens[0]), 1e-5);
  ASSERT_EQ(first.top.size(), 4u);
  EXPECT_EQ(first.top, sample::top_logprobs(logits, 4));
  for (const TokenLogprob& lp : result.logprobs) {
    EXPECT_LE(lp.logprob, 0.0f);
    EXPECT_FLOAT_EQ(lp.logprob, lp.top[0].second);  // greedy takes the most probable token
    for (size_t i = 1; i < lp.top.size(); ++i) EXPECT_GE(lp.top[i - 1].second, lp.top[i].second);
  }
}

}  // namespace
}  // namespace tokenmill::engine
