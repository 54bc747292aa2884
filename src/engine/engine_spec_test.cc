// Speculative decoding in the engine (prompt-lookup drafts, verified by the
// target): the tokens are exactly those of plain decoding, greedy or seeded,
// alone or in a batch, with prefix-cache hits and after preemption; stops
// inside an accepted draft end the request where plain decoding would; and
// the KV pool is whole again after many random requests with cancels.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "engine/engine_core.h"
#include "engine/test_util.h"

namespace tokenmill::engine {
namespace {

using testing::CoreDriver;
using testing::greedy_request;
using testing::random_prompt;
using testing::tiny_config;

EngineConfig ngram_config(int k = 4) {
  EngineConfig c = tiny_config();
  c.spec.method = spec::SpecMethod::kNgram;
  c.spec.ngram = {k, 1, 3};
  return c;
}

// A prompt that repeats itself, so prompt lookup finds drafts at once; the
// tiny model's greedy output also falls into loops, which it then drafts.
std::vector<int32_t> repeating_prompt(uint64_t seed, size_t n) {
  std::vector<int32_t> p = random_prompt(seed, n);
  const std::vector<int32_t> copy = p;
  p.insert(p.end(), copy.begin(), copy.end());
  p.insert(p.end(), copy.begin(), copy.begin() + static_cast<std::ptrdiff_t>(n / 2));
  return p;
}

// Each request's tokens, run together on one engine.
std::vector<GenerationResult> run_requests(const EngineConfig& config, const std::vector<GenerateRequest>& requests,
                                           MetricsSnapshot* metrics = nullptr) {
  CoreDriver d(config);
  std::vector<RequestHandle> handles;
  for (const GenerateRequest& r : requests) handles.push_back(d.add(r));
  d.run_to_end();
  std::vector<GenerationResult> out;
  for (RequestHandle& h : handles) out.push_back(h.wait());
  if (metrics != nullptr) *metrics = d.metrics();
  EXPECT_EQ(d.metrics().kv_blocks_used, 0);
  return out;
}

std::vector<GenerateRequest> greedy_batch() {
  std::vector<GenerateRequest> rs;
  for (uint64_t seed = 1; seed <= 6; ++seed) rs.push_back(greedy_request(repeating_prompt(seed, 12 + seed), 9 * seed));
  rs.push_back(greedy_request(random_prompt(40, 9), 1));  // one token: nothing to draft for
  rs[1].spec_max_draft = 0;                               // this one decodes plainly
  rs[2].spec_max_draft = 2;
  return rs;
}

TEST(EngineSpec, GreedyTokensAreThoseOfPlainDecoding) {
  const std::unique_ptr<model::Model> m = model::Model::load(testing::tiny_model_path());
  const std::vector<GenerateRequest> rs = greedy_batch();
  MetricsSnapshot metrics;
  const std::vector<GenerationResult> got = run_requests(ngram_config(), rs, &metrics);
  for (size_t i = 0; i < rs.size(); ++i) {
    EXPECT_EQ(got[i].tokens, testing::reference_greedy(*m, rs[i].prompt, rs[i].max_tokens)) << "request " << i;
    EXPECT_EQ(got[i].final.reason, FinishReason::kLength) << "request " << i;
  }
  // The drafts were really verified, and some were rejected.
  EXPECT_GT(metrics.spec_accepted_tokens, 20u);
  EXPECT_GT(metrics.spec_draft_tokens, metrics.spec_accepted_tokens);
  EXPECT_EQ(got[1].final.spec.draft_tokens, 0);  // spec_max_draft 0
  int64_t accepted = 0;
  for (const GenerationResult& g : got) accepted += g.final.spec.accepted_tokens;
  EXPECT_EQ(static_cast<uint64_t>(accepted), metrics.spec_accepted_tokens);
  // Accepted drafts cost no decode step of their own: fewer steps than tokens.
  EXPECT_LT(metrics.decode_tokens + metrics.spec_draft_tokens - metrics.spec_accepted_tokens,
            metrics.generated_tokens + metrics.spec_draft_tokens);
}

// A second round of the same prompts hits the prefix cache (blocks
// published from verified tokens only); a pool too small for every request
// at once preempts and recomputes. Both give plain decoding's tokens.
TEST(EngineSpec, PrefixHitsAndPreemptionKeepTheTokens) {
  const std::vector<GenerateRequest> rs = greedy_batch();
  const std::vector<GenerationResult> want = run_requests(tiny_config(), rs);

  CoreDriver d(ngram_config());
  for (int round = 0; round < 2; ++round) {
    std::vector<RequestHandle> hs;
    for (const GenerateRequest& r : rs) hs.push_back(d.add(r));
    d.run_to_end();
    int64_t cached = 0;
    for (size_t i = 0; i < rs.size(); ++i) {
      const GenerationResult g = hs[i].wait();
      EXPECT_EQ(g.tokens, want[i].tokens) << "round " << round << " request " << i;
      cached += g.final.usage.cached_prompt_tokens;
    }
    EXPECT_EQ(cached > 0, round == 1);
  }

  EngineConfig small = ngram_config(6);
  small.kv_num_blocks = 12;
  small.prefill_chunk = 16;
  const std::vector<GenerationResult> got = run_requests(small, rs);
  int64_t preemptions = 0;
  for (size_t i = 0; i < rs.size(); ++i) {
    EXPECT_EQ(got[i].tokens, want[i].tokens) << "small pool, request " << i;
    preemptions += got[i].final.num_preemptions;
  }
  EXPECT_GT(preemptions, 0) << "the pool was meant to run dry";
}

// Seeded sampling with penalties: the same seed gives the same tokens with
// drafts as without, because each verified position draws from the same
// sampler state and history as plain decoding would. A rule that kept a
// draft token the sampler did not pick (or drew twice for one position)
// would change them.
TEST(EngineSpec, SeededSamplingTokensAreThoseOfPlainDecoding) {
  std::vector<GenerateRequest> rs;
  for (uint64_t seed = 1; seed <= 12; ++seed) {
    GenerateRequest r = greedy_request(repeating_prompt(seed, 10), 40);
    r.sampling.temperature = 0.7f;
    r.sampling.top_k = 8;
    r.sampling.repetition_penalty = 1.05f;
    r.sampling.seed = seed;
    rs.push_back(r);
  }
  MetricsSnapshot metrics;
  const std::vector<GenerationResult> plain = run_requests(tiny_config(), rs);
  const std::vector<GenerationResult> spec = run_requests(ngram_config(), rs, &metrics);
  for (size_t i = 0; i < rs.size(); ++i) EXPECT_EQ(spec[i].tokens, plain[i].tokens) << "seed " << rs[i].sampling.seed;
  EXPECT_GT(metrics.spec_accepted_tokens, 0u);
}

// A stop string completed inside an accepted draft ends the request there,
// with the text plain decoding gives.
TEST(EngineSpec, StopsInsideADraftEndWhereThePlainRunEnds) {
  GenerateRequest r = greedy_request(repeating_prompt(3, 16), 60);
  const GenerationResult free_run = run_requests(tiny_config(), {r})[0];
  ASSERT_GT(free_run.text.size(), 40u);
  r.sampling.stop = {free_run.text.substr(30, 4)};
  const GenerationResult plain = run_requests(tiny_config(), {r})[0];
  MetricsSnapshot metrics;
  const GenerationResult spec = run_requests(ngram_config(), {r}, &metrics)[0];
  EXPECT_EQ(plain.final.reason, FinishReason::kStop);
  EXPECT_EQ(spec.final.reason, FinishReason::kStop);
  EXPECT_EQ(spec.text, plain.text);
  EXPECT_EQ(spec.tokens, plain.tokens);
  EXPECT_EQ(spec.final.usage.completion_tokens, plain.final.usage.completion_tokens);
}

// Property: after many random requests (random prompts that repeat or not,
// lengths, k per request, cancels at random steps, a pool small enough to
// preempt), every block is free or merely cached, and nothing is left.
TEST(EngineSpec, KvPoolIsWholeAfterRandomRequestsWithCancels) {
  EngineConfig c = ngram_config(8);
  c.kv_num_blocks = 24;
  c.max_seqs = 6;
  CoreDriver d(c);
  std::mt19937_64 rng(11);
  std::vector<RequestHandle> live;
  for (int i = 0; i < 300; ++i) {
    const size_t len = 4 + rng() % 30;
    GenerateRequest r =
        greedy_request(rng() % 2 ? repeating_prompt(rng(), len) : random_prompt(rng(), len), 1 + rng() % 40);
    r.spec_max_draft = static_cast<int>(rng() % 10) - 1;
    if (rng() % 3 == 0) {
      r.sampling.temperature = 0.8f;
      r.sampling.seed = rng();
    }
    live.push_back(d.add(r));
    const int steps = static_cast<int>(rng() % 4);
    for (int s = 0; s < steps && d.core().has_work(); ++s) d.core().step();
    if (rng() % 5 == 0) d.core().cancel(live[rng() % live.size()].id());
  }
  d.run_to_end();
  for (RequestHandle& h : live) {
    const GenerationResult g = h.wait();
    EXPECT_TRUE(g.final.reason == FinishReason::kLength || g.final.reason == FinishReason::kStop ||
                g.final.reason == FinishReason::kCancelled)
        << g.final.error;
  }
  const sched::SchedulerStats s = d.core().scheduler_stats();
  EXPECT_EQ(s.kv_blocks_used, 0);
  EXPECT_EQ(s.kv_blocks_free + s.kv_blocks_evictable, s.kv_blocks_total);
  EXPECT_GT(d.metrics().spec_accepted_tokens, 0u);
}

}  // namespace
}  // namespace tokenmill::engine
