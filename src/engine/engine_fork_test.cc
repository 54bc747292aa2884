// Parallel samples (GenerateRequest::n > 1, Engine::submit_samples): one
// prefill, then forks sharing the prompt's KV blocks copy-on-write. Checked
// against the independent greedy reference, with the prefix cache on and
// off, under preemption and cancellation, and through the block gauges.
#include <gtest/gtest.h>

#include <set>

#include "engine/engine.h"
#include "engine/engine_core.h"
#include "engine/test_util.h"

namespace tokenmill::engine {
namespace {

using testing::greedy_request;
using testing::random_prompt;
using testing::tiny_config;
using testing::tiny_model_path;
using testing::with_n;

std::vector<int32_t> reference(const std::vector<int32_t>& prompt, int64_t n) {
  std::unique_ptr<model::Model> m = model::Model::load(tiny_model_path());
  return testing::reference_greedy(*m, prompt, n);
}

std::vector<GenerationResult> wait_all(std::vector<RequestHandle>& handles) {
  std::vector<GenerationResult> out;
  for (RequestHandle& h : handles) out.push_back(h.wait());
  return out;
}

class ForkTest : public ::testing::TestWithParam<bool> {};  // prefix cache on / off

TEST_P(ForkTest, GreedySamplesEqualTheSingleContinuationAndPrefillOnce) {
  EngineConfig config = tiny_config();
  config.prefix_cache = GetParam();
  Engine engine(config);
  const std::vector<int32_t> prompt = random_prompt(31, 45);
  std::vector<RequestHandle> handles = engine.submit_samples(with_n(greedy_request(prompt, 12), 3));
  ASSERT_EQ(handles.size(), 3u);
  EXPECT_EQ(std::set<RequestId>({handles[0].id(), handles[1].id(), handles[2].id()}).size(), 3u);
  const std::vector<int32_t> expected = reference(prompt, 12);
  int sample = 0;
  for (const GenerationResult& r : wait_all(handles)) {
    EXPECT_EQ(r.final.sample_index, sample++);
    EXPECT_EQ(r.tokens, expected);
    EXPECT_EQ(r.final.reason, FinishReason::kLength);
    EXPECT_EQ(r.final.usage.prompt_tokens, 45);
    EXPECT_EQ(r.final.usage.completion_tokens, 12);
  }
  const MetricsSnapshot m = engine.metrics();
  EXPECT_EQ(m.prefill_tokens, 45u);  // the prompt ran once for the three samples
  EXPECT_EQ(m.prompt_tokens, 45u);   // and counts once
  EXPECT_EQ(m.kv_blocks_used, 0);
}

// 100 prompt tokens = 6 full blocks + 4 positions; 8 more tokens stay in
// the 7th block. Forks share all 7 and copy the 7th twice: 9 blocks, where
// three independent requests hold 3 x 7 (no prefix cache).
TEST_P(ForkTest, ForksHoldFewerBlocksThanIndependentRequests) {
  EngineConfig config = tiny_config();
  config.prefix_cache = GetParam();
  const std::vector<int32_t> prompt = random_prompt(32, 100);
  int64_t forked_high_water = 0;
  {
    Engine engine(config);
    std::vector<RequestHandle> handles = engine.submit_samples(with_n(greedy_request(prompt, 8), 3));
    const std::vector<GenerationResult> results = wait_all(handles);
    EXPECT_EQ(results[0].tokens, results[2].tokens);
    const MetricsSnapshot m = engine.metrics();
    forked_high_water = m.kv_blocks_high_water;
    EXPECT_EQ(m.cow_copies, 2u);
    EXPECT_EQ(m.kv_blocks_used, 0);
  }
  EXPECT_EQ(forked_high_water, 9);
  config.prefix_cache = false;
  Engine engine(config);
  engine.pause();  // all three in one batch
  std::vector<RequestHandle> handles;
  for (int k = 0; k < 3; ++k) handles.push_back(engine.submit(greedy_request(prompt, 8)));
  engine.resume();
  wait_all(handles);
  EXPECT_EQ(engine.metrics().kv_blocks_high_water, 21);
  EXPECT_LT(forked_high_water, engine.metrics().kv_blocks_high_water);
}

TEST_P(ForkTest, SeededSamplesDifferAndAreReproducible) {
  EngineConfig config = tiny_config();
  config.prefix_cache = GetParam();
  GenerateRequest r = with_n(greedy_request(random_prompt(33, 20), 16), 3);
  r.sampling.temperature = 1.5f;
  r.sampling.seed = 1234;
  // Fresh engines: the same batches in the same order, so the same logits.
  const auto run = [&] {
    Engine engine(config);
    std::vector<RequestHandle> handles = engine.submit_samples(r);
    return wait_all(handles);
  };
  const std::vector<GenerationResult> a = run();
  const std::vector<GenerationResult> b = run();
  std::set<std::vector<int32_t>> distinct;
  for (size_t k = 0; k < 3; ++k) {
    EXPECT_EQ(a[k].tokens, b[k].tokens) << "sample " << k;
    distinct.insert(a[k].tokens);
  }
  EXPECT_EQ(distinct.size(), 3u);
}

INSTANTIATE_TEST_SUITE_P(PrefixCache, ForkTest, ::testing::Bool());

// A pool too small for the forks and a competing request at their full
// length: preemption recomputes forked sequences, which still produce the
// reference tokens.
TEST(ForkPreemptionTest, PreemptedForksRecomputeIdentically) {
  EngineConfig config = tiny_config();
  config.kv_num_blocks = 12;
  config.kv_exhausted = sched::KvExhaustedPolicy::kPreempt;
  Engine engine(config);
  const std::vector<int32_t> prompt = random_prompt(34, 40);
  const std::vector<int32_t> other_prompt = random_prompt(35, 40);
  engine.pause();
  std::vector<RequestHandle> handles = engine.submit_samples(with_n(greedy_request(prompt, 40), 3));
  RequestHandle other = engine.submit(greedy_request(other_prompt, 40));
  engine.resume();
  const std::vector<int32_t> expected = reference(prompt, 40);
  int64_t preemptions = 0;
  for (const GenerationResult& r : wait_all(handles)) {
    EXPECT_EQ(r.tokens, expected);
    preemptions += r.final.num_preemptions;
  }
  const GenerationResult o = other.wait();
  EXPECT_EQ(o.tokens, reference(other_prompt, 40));
  preemptions += o.final.num_preemptions;
  EXPECT_GT(preemptions, 0) << "the pool was never short";
  EXPECT_EQ(engine.metrics().kv_blocks_used, 0);
}

// Driven step by step (EngineCore, no engine thread) so the cancels land
// at a known point: after the fork and a few decode steps.
TEST(ForkCancelTest, CancellingEverySampleFreesTheWholePool) {
  Metrics metrics;
  EngineCore core(tiny_config(), metrics);
  std::vector<std::shared_ptr<RequestStream>> streams;
  std::vector<RequestHandle> handles;
  for (RequestId id = 1; id <= 4; ++id) {
    streams.push_back(std::make_shared<RequestStream>(id));
    handles.emplace_back(streams.back());
  }
  core.add(streams, with_n(greedy_request(random_prompt(36, 50), 200), 4), SteadyClock::now());
  for (int i = 0; i < 5; ++i) core.step();  // 2 prefill chunks, then decodes of all four
  EXPECT_GT(metrics.snapshot().running, 3);
  EXPECT_GT(metrics.snapshot().kv_blocks_used, 4);
  for (RequestId id = 1; id <= 4; ++id) core.cancel(id);
  while (core.has_work()) core.step();
  for (const GenerationResult& r : wait_all(handles)) {
    EXPECT_EQ(r.final.reason, FinishReason::kCancelled);
    EXPECT_EQ(r.tokens.size(), 4u);
  }
  const MetricsSnapshot m = metrics.snapshot();
  EXPECT_EQ(m.kv_blocks_used, 0);
  EXPECT_EQ(m.kv_blocks_free + m.kv_blocks_evictable, m.kv_blocks_total);
}

TEST(ForkCancelTest, ASampleCancelledBeforeTheForkEndsAloneAndSampleZeroEndsAll) {
  Engine engine(tiny_config());
  const std::vector<int32_t> prompt = random_prompt(37, 30);
  engine.pause();
  std::vector<RequestHandle> handles = engine.submit_samples(with_n(greedy_request(prompt, 6), 3));
  handles[1].cancel();
  engine.resume();
  const std::vector<GenerationResult> r = wait_all(handles);
  EXPECT_EQ(r[1].final.reason, FinishReason::kCancelled);
  EXPECT_TRUE(r[1].tokens.empty());
  EXPECT_EQ(r[0].tokens, reference(prompt, 6));
  EXPECT_EQ(r[2].tokens, r[0].tokens);

  engine.pause();
  handles = engine.submit_samples(with_n(greedy_request(prompt, 6), 3));
  handles[0].cancel();
  engine.resume();
  for (const GenerationResult& g : wait_all(handles)) EXPECT_EQ(g.final.reason, FinishReason::kCancelled);
  EXPECT_EQ(engine.metrics().kv_blocks_used, 0);
}

TEST(ForkRejectTest, RefusalsEndEverySample) {
  EngineConfig config = tiny_config();
  config.kv_num_blocks = 8;  // 128 positions
  config.max_seqs = 4;
  Engine engine(config);
  // One sample fits (60 + 40 positions); three do not (3 shared + 3 x 4 blocks).
  std::vector<RequestHandle> handles = engine.submit_samples(with_n(greedy_request(random_prompt(38, 60), 40), 3));
  for (const GenerationResult& g : wait_all(handles)) EXPECT_EQ(g.final.reject, RejectReason::kKvNeverFits);
  handles = engine.submit_samples(with_n(greedy_request({1, 2}, 2), 5));  // n > max_seqs
  ASSERT_EQ(handles.size(), 5u);
  for (const GenerationResult& g : wait_all(handles)) EXPECT_EQ(g.final.reject, RejectReason::kInvalid);
  // submit() takes one sample only.
  EXPECT_EQ(engine.submit(with_n(greedy_request({1, 2}, 2), 2)).wait().final.reject, RejectReason::kInvalid);
}

TEST(ForkLogprobsTest, EverySampleCarriesThePromptLogprobs) {
  Engine engine(tiny_config());
  GenerateRequest r = with_n(greedy_request(random_prompt(39, 20), 3), 2);
  r.prompt_logprobs = 1;
  std::vector<RequestHandle> handles = engine.submit_samples(r);
  const std::vector<GenerationResult> g = wait_all(handles);
  ASSERT_EQ(g[0].prompt_logprobs.size(), 19u);
  ASSERT_EQ(g[1].prompt_logprobs.size(), 19u);
  for (size_t i = 0; i < 19; ++i) EXPECT_EQ(g[0].prompt_logprobs[i].logprob, g[1].prompt_logprobs[i].logprob);
}

}  // namespace
}  // namespace tokenmill::engine
