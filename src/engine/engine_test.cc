// End-to-end tests of the threaded Engine on a tiny synthetic model. Every
// expectation is exact (token ids, reasons, counts); none depends on timing.
#include "engine/engine.h"

#include <gtest/gtest.h>

#include <chrono>

#include "engine/test_util.h"
#include "util/error.h"

namespace tokenmill::engine {
namespace {

using testing::greedy_request;
using testing::random_prompt;
using testing::tiny_config;

struct Case {
  std::vector<int32_t> prompt;
  int64_t max_tokens;
};

// 32 requests of mixed prompt (1..100) and output (1..40) lengths.
std::vector<Case> mixed_cases() {
  std::vector<Case> cases;
  for (uint64_t i = 0; i < 32; ++i) {
    const size_t len = 1 + (i * 37) % 100;
    cases.push_back({random_prompt(100 + i, len), static_cast<int64_t>(1 + (i * 13) % 40)});
  }
  return cases;
}

std::vector<std::vector<int32_t>> references(const std::vector<Case>& cases) {
  std::unique_ptr<model::Model> m = model::Model::load(testing::tiny_model_path());
  std::vector<std::vector<int32_t>> out;
  for (const Case& c : cases) out.push_back(testing::reference_greedy(*m, c.prompt, c.max_tokens));
  return out;
}

// Submits every case at once (paused, so they arrive in one step) and
// returns the results in order.
std::vector<GenerationResult> run_all(Engine& engine, const std::vector<Case>& cases) {
  engine.pause();
  std::vector<RequestHandle> handles;
  for (const Case& c : cases) handles.push_back(engine.submit(greedy_request(c.prompt, c.max_tokens)));
  engine.resume();
  std::vector<GenerationResult> results;
  for (RequestHandle& h : handles) results.push_back(h.wait());
  return results;
}

void expect_matches(const std::vector<GenerationResult>& results, const std::vector<std::vector<int32_t>>& want) {
  ASSERT_EQ(results.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(results[i].final.reason, FinishReason::kLength) << "request " << i << ": " << results[i].final.error;
    EXPECT_EQ(results[i].tokens, want[i]) << "request " << i;
    EXPECT_EQ(results[i].final.usage.completion_tokens, static_cast<int64_t>(want[i].size()));
  }
}

TEST(EngineTest, GreedyMatchesTheReferenceAloneAndInABatch) {
  const std::vector<Case> cases = mixed_cases();
  const auto want = references(cases);
  EngineConfig config = tiny_config();
  config.prefix_cache = false;
  Engine engine(config);
  // One at a time.
  for (size_t i = 0; i < 4; ++i) {
    GenerationResult r = engine.submit(greedy_request(cases[i].prompt, cases[i].max_tokens)).wait();
    EXPECT_EQ(r.tokens, want[i]) << "request " << i;
  }
  // All 32 together.
  expect_matches(run_all(engine, cases), want);
  const MetricsSnapshot m = engine.metrics();
  EXPECT_GT(m.last_step.num_seqs, 0);
  EXPECT_EQ(m.kv_blocks_used, 0);
}

TEST(EngineTest, ChunkedAndUnchunkedPrefillAgree) {
  const std::vector<Case> cases = mixed_cases();
  const auto want = references(cases);
  for (int64_t chunk : {0, 7, 16}) {
    EngineConfig config = tiny_config();
    config.prefill_chunk = chunk;
    config.max_batch_tokens = chunk == 0 ? 256 : 40;  // chunked: prompts must split across steps
    Engine engine(config);
    SCOPED_TRACE(chunk);
    expect_matches(run_all(engine, cases), want);
  }
}

TEST(EngineTest, PreemptionAndRecomputeGiveTheSameTokens) {
  const std::vector<Case> cases = mixed_cases();
  const auto want = references(cases);
  for (bool prefix_cache : {false, true}) {
    EngineConfig config = tiny_config();
    config.kv_num_blocks = 12;  // 192 positions for 32 requests: sequences must be preempted
    config.kv_exhausted = sched::KvExhaustedPolicy::kPreempt;
    config.prefix_cache = prefix_cache;
    Engine engine(config);
    SCOPED_TRACE(prefix_cache);
    const std::vector<GenerationResult> results = run_all(engine, cases);
    expect_matches(results, want);
    const MetricsSnapshot m = engine.metrics();
    EXPECT_GT(m.preemptions, 0u);
    int64_t preempted = 0;
    for (const GenerationResult& r : results) preempted += r.final.num_preemptions;
    EXPECT_EQ(static_cast<uint64_t>(preempted), m.preemptions);
    EXPECT_EQ(m.kv_blocks_used, 0);
    EXPECT_EQ(m.kv_blocks_free + m.kv_blocks_evictable, m.kv_blocks_total);
  }
}

// (Cancelling a running request is checked step by step in engine_core_test.cc;
// here the cancel paths through the handle and the engine, deterministically
// while the request is still queued behind a pause.)
TEST(EngineTest, CancelByHandleOrIdEndsTheRequest) {
  Engine engine(tiny_config());
  engine.pause();
  RequestHandle by_handle = engine.submit(greedy_request(random_prompt(1, 40), 50));
  RequestHandle by_id = engine.submit(greedy_request(random_prompt(2, 10), 50));
  RequestHandle kept = engine.submit(greedy_request(random_prompt(3, 10), 5));
  by_handle.cancel();
  engine.cancel(by_id.id());
  engine.resume();
  EXPECT_EQ(by_handle.wait().final.reason, FinishReason::kCancelled);
  EXPECT_EQ(by_id.wait().final.reason, FinishReason::kCancelled);
  EXPECT_EQ(kept.wait().final.reason, FinishReason::kLength);
  kept.cancel();  // after the end: ignored
  const MetricsSnapshot m = engine.metrics();
  EXPECT_EQ(m.requests_finished[static_cast<size_t>(FinishReason::kCancelled)], 2u);
  EXPECT_EQ(m.kv_blocks_used, 0);
}

TEST(EngineTest, RequestsThatCanNeverFitAreRejectedAtSubmit) {
  EngineConfig config = tiny_config();
  config.kv_num_blocks = 8;  // 128 positions
  Engine engine(config);
  const auto rejected = [&](GenerateRequest r) {
    RequestHandle h = engine.submit(std::move(r));
    EXPECT_TRUE(h.done());  // before the engine thread saw it
    return h.wait().final;
  };
  FinalEvent f = rejected(greedy_request(random_prompt(1, 200), 100));  // > context 256
  EXPECT_EQ(f.reason, FinishReason::kRejected);
  EXPECT_EQ(f.reject, RejectReason::kContextExceeded);
  EXPECT_NE(f.error.find("context"), std::string::npos) << f.error;
  f = rejected(greedy_request(random_prompt(1, 100), 60));  // 159 positions > 128 in the pool
  EXPECT_EQ(f.reject, RejectReason::kKvNeverFits);
  EXPECT_NE(f.error.find("KV blocks"), std::string::npos) << f.error;
  f = rejected(greedy_request(random_prompt(1, 256), 1));  // the prompt alone fills the context
  EXPECT_EQ(f.reject, RejectReason::kPromptTooLong);
  EXPECT_NE(f.error.find("leaves no room"), std::string::npos) << f.error;
  f = rejected(greedy_request({1, 600}, 5));
  EXPECT_EQ(f.reject, RejectReason::kInvalid);
  EXPECT_NE(f.error.find("600"), std::string::npos) << f.error;
  GenerateRequest two = greedy_request({1, 2}, 5);
  two.n = 2;
  EXPECT_EQ(rejected(two).reject, RejectReason::kInvalid);
  GenerateRequest bad = greedy_request({1, 2}, 5);
  bad.sampling.top_p = 0;
  EXPECT_EQ(rejected(bad).reject, RejectReason::kInvalid);
  EXPECT_EQ(rejected(greedy_request({}, 5)).reject, RejectReason::kInvalid);
  EXPECT_EQ(rejected(greedy_request({1}, 0)).reject, RejectReason::kInvalid);

  const MetricsSnapshot m = engine.metrics();
  EXPECT_EQ(m.requests_submitted, 8u);
  EXPECT_EQ(m.requests_rejected[static_cast<size_t>(RejectReason::kPromptTooLong)], 1u);
  EXPECT_EQ(m.requests_rejected[static_cast<size_t>(RejectReason::kContextExceeded)], 1u);
  EXPECT_EQ(m.requests_rejected[static_cast<size_t>(RejectReason::kKvNeverFits)], 1u);
  EXPECT_EQ(m.requests_rejected[static_cast<size_t>(RejectReason::kInvalid)], 5u);
  EXPECT_EQ(m.requests_finished[static_cast<size_t>(FinishReason::kRejected)], 8u);
}

TEST(EngineTest, BadConfigsAreErrors) {
  EngineConfig missing = tiny_config();
  missing.model_path = "/nonexistent/model.gguf";
  EXPECT_THROW(Engine{missing}, Error);
  EngineConfig tiny_budget = tiny_config();
  tiny_budget.kv_num_blocks = 0;
  tiny_budget.kv_memory_bytes = 1024;  // less than one block
  EXPECT_THROW(Engine{tiny_budget}, Error);
  EngineConfig bad = tiny_config();
  bad.max_batch_tokens = 4;  // < max_seqs
  EXPECT_THROW(Engine{bad}, Error);
}

// A burst arriving between two steps: max_waiting counts only what cannot
// start, so an idle engine takes max_seqs (32) + max_waiting (4) of 40.
TEST(EngineTest, OverloadBeyondTheWaitingBound) {
  EngineConfig config = tiny_config();
  config.max_waiting = 4;
  Engine engine(config);
  engine.pause();
  std::vector<RequestHandle> handles;
  for (uint64_t i = 0; i < 40; ++i) handles.push_back(engine.submit(greedy_request(random_prompt(i, 8), 2)));
  engine.resume();
  int finished = 0, rejected = 0;
  for (RequestHandle& h : handles) {
    const FinalEvent f = h.wait().final;
    (f.reason == FinishReason::kRejected ? rejected : finished) += 1;
    if (f.reason == FinishReason::kRejected) {
      EXPECT_EQ(f.reject, RejectReason::kQueueFull);
      EXPECT_NE(f.error.find("waiting queue is full"), std::string::npos) << f.error;
    }
  }
  EXPECT_EQ(finished, 36);
  EXPECT_EQ(rejected, 4);
  EXPECT_EQ(engine.metrics().requests_rejected[static_cast<size_t>(RejectReason::kQueueFull)], 4u);
}

TEST(EngineTest, RejectPolicyRefusesWhatTheFreeBlocksCannotHold) {
  EngineConfig config = tiny_config();
  config.kv_num_blocks = 4;  // 64 positions
  config.kv_exhausted = sched::KvExhaustedPolicy::kReject;
  Engine engine(config);
  engine.pause();
  // Each prompt needs 3 blocks: the second finds only 1 unclaimed.
  RequestHandle a = engine.submit(greedy_request(random_prompt(11, 40), 4));
  RequestHandle b = engine.submit(greedy_request(random_prompt(12, 40), 4));
  engine.resume();
  EXPECT_EQ(a.wait().final.reason, FinishReason::kLength);
  const FinalEvent f = b.wait().final;
  EXPECT_EQ(f.reason, FinishReason::kRejected);
  EXPECT_EQ(f.reject, RejectReason::kKvExhausted);
  EXPECT_TRUE(is_transient(f.reject));
  EXPECT_NE(f.error.find("KV cache is exhausted"), std::string::npos) << f.error;
  EXPECT_EQ(engine.metrics().requests_rejected[static_cast<size_t>(RejectReason::kKvExhausted)], 1u);
}

TEST(EngineTest, DeadlineThatPassesInTheQueueIsARejection) {
  Engine engine(tiny_config());
  GenerateRequest r = greedy_request(random_prompt(3, 20), 50);
  r.timeout = std::chrono::milliseconds(0);  // expired by the time it is scheduled
  const GenerationResult result = engine.submit(r).wait();
  EXPECT_EQ(result.final.reason, FinishReason::kRejected);
  EXPECT_EQ(result.final.reject, RejectReason::kDeadlineExpired);
  EXPECT_NE(result.final.error.find("queued"), std::string::npos) << result.final.error;
  EXPECT_EQ(result.final.usage.completion_tokens, 0);
  EXPECT_EQ(engine.metrics().kv_blocks_used, 0);
  EXPECT_EQ(engine.metrics().requests_rejected[static_cast<size_t>(RejectReason::kDeadlineExpired)], 1u);
}

TEST(EngineTest, StopAbortsInFlightRequestsAndRejectsLaterOnes) {
  Engine engine(tiny_config());
  engine.pause();
  RequestHandle h = engine.submit(greedy_request(random_prompt(4, 20), 100));
  engine.stop(Engine::StopMode::kAbort);
  const FinalEvent f = h.wait().final;
  EXPECT_EQ(f.reason, FinishReason::kCancelled);
  EXPECT_NE(f.error.find("shutting down"), std::string::npos);
  const FinalEvent late = engine.submit(greedy_request({1, 2}, 3)).wait().final;
  EXPECT_EQ(late.reason, FinishReason::kRejected);
  EXPECT_EQ(late.reject, RejectReason::kShuttingDown);
  EXPECT_EQ(engine.metrics().requests_rejected[static_cast<size_t>(RejectReason::kShuttingDown)], 1u);
}

TEST(EngineTest, DrainFinishesSubmittedRequests) {
  Engine engine(tiny_config());
  RequestHandle h = engine.submit(greedy_request(random_prompt(5, 20), 30));
  engine.stop(Engine::StopMode::kDrain);
  const GenerationResult r = h.wait();
  EXPECT_EQ(r.final.reason, FinishReason::kLength);
  EXPECT_EQ(r.tokens.size(), 30u);
}

}  // namespace
}  // namespace tokenmill::engine
