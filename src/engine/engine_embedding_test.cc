// Embedding requests (GenerateRequest::embedding) through the engine: the
// pooled vector against one whole-prompt forward pass of the model, across
// prefill chunks, batched with generation, with the prefix cache warm, and
// the request checks.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "engine/engine.h"
#include "engine/test_util.h"

namespace tokenmill::engine {
namespace {

using testing::CoreDriver;
using testing::greedy_request;
using testing::random_prompt;
using testing::tiny_config;
using testing::tiny_model_path;

// The pooled, normalised final hidden state of `prompt` from one forward
// pass over the whole prompt (its own KV pool, no scheduler, no chunks).
std::vector<double> reference_embedding(const std::vector<int32_t>& prompt, Pooling pooling) {
  std::unique_ptr<model::Model> m = model::Model::load(tiny_model_path());
  ThreadPool threads(1);
  const int64_t n = static_cast<int64_t>(prompt.size());
  const int64_t embd = m->config().n_embd;
  constexpr int64_t kBlock = 16;
  kv::PagedKvStorage kv(m->kv_geometry(kBlock, kv::KvDtype::F16), (n + kBlock - 1) / kBlock);
  std::vector<int32_t> blocks(static_cast<size_t>(kv.num_blocks()));
  std::iota(blocks.begin(), blocks.end(), 0);
  const model::ChunkTable table{blocks, 0};
  model::SequenceChunk chunk{prompt, 0, {&table, 1}, model::LogitRows::kNone};
  chunk.hidden = true;
  kv::PagedKvStorage* const pools[] = {&kv};
  std::vector<float> logits, hidden;
  m->forward({&chunk, 1}, pools, logits, threads, {}, &hidden);
  EXPECT_TRUE(logits.empty());
  EXPECT_EQ(static_cast<int64_t>(hidden.size()), n * embd);
  std::vector<double> v(static_cast<size_t>(embd), 0.0);
  const int64_t first = pooling == Pooling::kLast ? n - 1 : 0;
  for (int64_t p = first; p < n; ++p)
    for (int64_t d = 0; d < embd; ++d) v[static_cast<size_t>(d)] += hidden[static_cast<size_t>(p * embd + d)];
  double n2 = 0;
  for (double x : v) n2 += x * x;
  for (double& x : v) x /= std::sqrt(n2);
  return v;
}

GenerateRequest embedding_request(std::vector<int32_t> prompt, Pooling pooling) {
  GenerateRequest r;
  r.prompt = std::move(prompt);
  r.max_tokens = 0;
  r.embedding = pooling;
  return r;
}

// Float32 sums over different chunkings differ in the last bits only.
void expect_embedding(const std::vector<float>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t d = 0; d < want.size(); ++d) EXPECT_NEAR(got[d], want[d], 1e-5) << "dimension " << d;
}

TEST(EngineEmbeddingTest, PoolsThePromptAcrossChunksWithoutGenerating) {
  const std::vector<int32_t> prompt = random_prompt(31, 70);  // 3 prefill chunks of 32
  Engine engine(tiny_config());
  for (Pooling pooling : {Pooling::kMean, Pooling::kLast}) {
    const GenerationResult r = engine.submit(embedding_request(prompt, pooling)).wait();
    EXPECT_EQ(r.final.reason, FinishReason::kLength) << r.final.error;
    EXPECT_TRUE(r.tokens.empty());
    EXPECT_TRUE(r.text.empty());
    EXPECT_EQ(r.final.usage.prompt_tokens, 70);
    EXPECT_EQ(r.final.usage.completion_tokens, 0);
    expect_embedding(r.final.embedding, reference_embedding(prompt, pooling));
  }
  EXPECT_EQ(engine.metrics().kv_blocks_used, 0);
}

TEST(EngineEmbeddingTest, SharesStepsWithGenerationAndChangesNeitherResult) {
  const std::vector<int32_t> gen_prompt = random_prompt(32, 30);
  const std::vector<int32_t> emb_prompt = random_prompt(33, 45);
  std::unique_ptr<model::Model> m = model::Model::load(tiny_model_path());
  const std::vector<int32_t> expected = testing::reference_greedy(*m, gen_prompt, 8);
  CoreDriver driver(tiny_config());
  RequestHandle gen = driver.add(greedy_request(gen_prompt, 8));
  RequestHandle emb = driver.add(embedding_request(emb_prompt, Pooling::kMean));
  RequestHandle emb_last = driver.add(embedding_request(emb_prompt, Pooling::kLast));
  driver.run_to_end();
  const GenerationResult g = gen.wait();
  const GenerationResult e = emb.wait();
  const GenerationResult l = emb_last.wait();
  EXPECT_EQ(g.tokens, expected);
  expect_embedding(e.final.embedding, reference_embedding(emb_prompt, Pooling::kMean));
  expect_embedding(l.final.embedding, reference_embedding(emb_prompt, Pooling::kLast));
  // All three ran in the engine's first step (continuous batching).
  EXPECT_EQ(g.final.first_scheduled_step, 0);
  EXPECT_EQ(e.final.first_scheduled_step, 0);
  EXPECT_EQ(l.final.first_scheduled_step, 0);
}

TEST(EngineEmbeddingTest, PrefixCacheHitsOnlyForLastPooling) {
  const std::vector<int32_t> prompt = random_prompt(34, 50);
  Engine engine(tiny_config());
  EXPECT_EQ(engine.submit(greedy_request(prompt, 2)).wait().final.reason, FinishReason::kLength);  // warms the cache
  const GenerationResult mean = engine.submit(embedding_request(prompt, Pooling::kMean)).wait();
  EXPECT_EQ(mean.final.usage.cached_prompt_tokens, 0);  // every position pooled
  expect_embedding(mean.final.embedding, reference_embedding(prompt, Pooling::kMean));
  const GenerationResult last = engine.submit(embedding_request(prompt, Pooling::kLast)).wait();
  EXPECT_GT(last.final.usage.cached_prompt_tokens, 0);
  expect_embedding(last.final.embedding, reference_embedding(prompt, Pooling::kLast));
}

TEST(EngineEmbeddingTest, RefusesGenerationFields) {
  Engine engine(tiny_config());
  GenerateRequest with_tokens = embedding_request({1, 2, 3}, Pooling::kMean);
  with_tokens.max_tokens = 4;
  EXPECT_EQ(engine.submit(with_tokens).wait().final.reject, RejectReason::kInvalid);
  GenerateRequest scored = embedding_request({1, 2, 3}, Pooling::kMean);
  scored.prompt_logprobs = 0;
  EXPECT_EQ(engine.submit(scored).wait().final.reject, RejectReason::kInvalid);
  GenerateRequest samples = embedding_request({1, 2, 3}, Pooling::kMean);
  samples.n = 2;
  for (RequestHandle& h : engine.submit_samples(samples)) EXPECT_EQ(h.wait().final.reject, RejectReason::kInvalid);
  // A prompt that fills the context is refused as any other.
  const GenerateRequest whole = embedding_request(random_prompt(35, 256), Pooling::kMean);
  EXPECT_EQ(engine.submit(whole).wait().final.reject, RejectReason::kPromptTooLong);
  const GenerationResult one = engine.submit(embedding_request({7}, Pooling::kMean)).wait();
  EXPECT_EQ(one.final.reason, FinishReason::kLength);
  EXPECT_EQ(one.final.embedding.size(), static_cast<size_t>(engine.model_config().n_embd));
}

}  // namespace
}  // namespace tokenmill::engine
