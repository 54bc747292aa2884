// The streaming KV policy (attention sinks + recent window) and the
// heavy-hitter one (h2o) end to end in the engine, set for the engine or
// brought by each request: greedy tokens equal an engine-free reference that runs the
// same policy in one private sequence (model::SingleSequence: the same
// chunks, the same evictions before each step), with keys at their true
// positions or re-rotated, on a synthetic llama and on a synthetic gemma3
// whose sliding-window layers keep their own pool; a window longer than
// the sequence gives today's tokens; requests report what was evicted
// (timings) and the metrics count it; the pools end free.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <utility>

#include "engine/engine_core.h"
#include "engine/test_util.h"
#include "kv/test_policy_cases.h"
#include "util/error.h"

namespace tokenmill::engine {
namespace {

using testing::greedy_request;
using testing::random_prompt;

constexpr int64_t kChunk = 16;

// A synthetic gemma3 of 6 layers (five local with the window of 8, one
// global), written once per process.
const std::string& streaming_gemma_path() {
  static const std::string* path = [] {
    const std::filesystem::path p = std::filesystem::temp_directory_path() /
                                    ("tokenmill_streaming_gemma_test_" + std::to_string(::getpid()) + ".gguf");
    model::SynthOptions o;
    o.arch = model::SynthArch::kGemma3;
    o.preset = "tiny";
    o.overrides.n_layer = 6;
    o.format = *model::parse_weight_format("F32");
    o.seed = 21;
    o.num_threads = 1;
    model::write_synth_model(o, p.string());
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove(*path, ec);
    });
    return new std::string(p.string());
  }();
  return *path;
}

// The greedy continuation under `policy` in one private sequence: the
// prompt in chunks of kChunk, then one token per step, as the engine runs a
// lone request (block size 16 on both sides).
std::vector<int32_t> streaming_reference(model::Model& m, const std::vector<int32_t>& prompt, int64_t n,
                                         const kv::KvPolicy& policy) {
  ThreadPool pool(1);
  model::SingleSequence seq(m, static_cast<int64_t>(prompt.size()) + n, kv::KvDtype::F16, policy, kChunk, &pool);
  std::vector<float> logits;
  for (size_t pos = 0; pos < prompt.size(); pos += kChunk) {
    const size_t len = std::min<size_t>(kChunk, prompt.size() - pos);
    seq.forward({prompt.data() + pos, len}, false, logits, pool);
  }
  std::vector<int32_t> out;
  for (int64_t i = 0; i < n; ++i) {
    out.push_back(static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin()));
    if (i + 1 < n) seq.forward({&out.back(), 1}, false, logits, pool);
  }
  return out;
}

struct StreamingRun {
  std::vector<std::vector<int32_t>> tokens;
  std::vector<int64_t> evicted;  // timings.kv_evicted_tokens per request
  MetricsSnapshot metrics;
  sched::SchedulerStats stats;
};

StreamingRun run_streaming(const EngineConfig& config, const std::vector<GenerateRequest>& requests) {
  Metrics metrics;
  EngineCore core(config, metrics);
  std::vector<RequestHandle> handles;
  RequestId id = 1;
  for (const GenerateRequest& r : requests) {
    auto stream = std::make_shared<RequestStream>(id++);
    core.add({stream}, r, SteadyClock::now());
    handles.emplace_back(stream);
  }
  while (core.has_work()) core.step();
  StreamingRun run;
  for (RequestHandle& h : handles) {
    const GenerationResult r = h.wait();
    EXPECT_EQ(r.final.reason, FinishReason::kLength) << r.final.error;
    run.tokens.push_back(r.tokens);
    run.evicted.push_back(r.final.timings.kv_evicted_tokens);
  }
  run.metrics = metrics.snapshot();
  run.stats = core.scheduler_stats();
  return run;
}

EngineConfig streaming_engine(const std::string& model_path, const kv::KvPolicy& policy) {
  EngineConfig c = testing::tiny_config();
  c.model_path = model_path;
  c.block_size = 16;
  c.prefill_chunk = kChunk;
  c.kv_policy = policy;
  return c;
}

// Streaming (sinks 4, window 40) and h2o (sinks 4, window 24, budget 64),
// keys preserved or re-rotated.
class EngineStreaming : public ::testing::TestWithParam<kv::testing::PolicyCase> {
 protected:
  static kv::KvPolicy policy() {
    if (GetParam().first == kv::KvPolicyKind::kHeavyHitter)
      return kv::heavy_hitter_policy(4, 24, 64, GetParam().second);
    return kv::streaming_policy(4, 40, GetParam().second);
  }
};

// Three prompts of 30-44 tokens generating 120 each: every token is the
// reference's, each request evicted about 100 positions, the metrics count
// them all, both pools end free. The same requests carrying the policy
// themselves (GenerateRequest::kv_policy) to an engine whose own policy
// is full give the same tokens.
TEST_P(EngineStreaming, GreedyTokensEqualTheSingleSequenceReference) {
  const kv::KvPolicy policy = this->policy();
  for (const std::string* path : {&testing::tiny_model_path(), &streaming_gemma_path()}) {
    SCOPED_TRACE(*path);
    const std::unique_ptr<model::Model> m = model::Model::load(*path);
    std::vector<GenerateRequest> requests;
    for (uint64_t i = 0; i < 3; ++i) requests.push_back(greedy_request(random_prompt(70 + i, 30 + 7 * i), 120));
    const StreamingRun run = run_streaming(streaming_engine(*path, policy), requests);
    int64_t total = 0;
    for (size_t i = 0; i < requests.size(); ++i) {
      EXPECT_EQ(run.tokens[i], streaming_reference(*m, requests[i].prompt, 120, policy)) << "request " << i;
      EXPECT_GE(run.evicted[i], 80) << "request " << i;
      EXPECT_EQ(run.evicted[i] % 16, 0);
      total += run.evicted[i];
    }
    EXPECT_EQ(run.metrics.kv_evicted_tokens, static_cast<uint64_t>(total));
    EXPECT_EQ(run.stats.kv_blocks_used, 0);
    EXPECT_EQ(run.stats.kv_window_blocks_used, 0);
    // Each sequence held its sinks, window and step: 1 + 4 + 1 blocks.
    EXPECT_LE(run.stats.kv_blocks_high_water, 3 * policy.max_blocks(16, kChunk));
    std::vector<GenerateRequest> own = requests;
    for (GenerateRequest& r : own) r.kv_policy = policy;
    EXPECT_EQ(run_streaming(streaming_engine(*path, {}), own).tokens, run.tokens);
  }
}

INSTANTIATE_TEST_SUITE_P(Policies, EngineStreaming, ::testing::ValuesIn(kv::testing::kEvictingPolicyCases),
                         [](const auto& info) { return kv::testing::policy_case_name(info.param); });

// A window longer than prompt + output: no eviction, today's tokens.
TEST(EngineStreamingSame, AWindowLongerThanTheSequenceGivesTodaysTokens) {
  const std::unique_ptr<model::Model> m = model::Model::load(testing::tiny_model_path());
  const std::vector<GenerateRequest> requests = {greedy_request(random_prompt(80, 25), 60),
                                                 greedy_request(random_prompt(81, 40), 50)};
  const StreamingRun run = run_streaming(
      streaming_engine(testing::tiny_model_path(), kv::streaming_policy(4, 128, kv::KvPositions::kRerotate)), requests);
  for (size_t i = 0; i < requests.size(); ++i) {
    EXPECT_EQ(run.tokens[i], testing::reference_greedy(*m, requests[i].prompt, requests[i].max_tokens));
    EXPECT_EQ(run.evicted[i], 0);
  }
  EXPECT_EQ(run.metrics.kv_evicted_tokens, 0u);
}

// A pool far smaller than one full sequence still serves long requests
// under the policy (admission counts the policy's blocks), and the full
// policy refuses the same request as never fitting.
TEST(EngineStreamingSame, APoolSmallerThanTheSequenceServesIt) {
  EngineConfig c =
      streaming_engine(testing::tiny_model_path(), kv::streaming_policy(4, 40, kv::KvPositions::kPreserve));
  c.kv_num_blocks = 12;  // 192 positions; the request needs 230
  const StreamingRun run = run_streaming(c, {greedy_request(random_prompt(82, 30), 200)});
  EXPECT_EQ(run.tokens[0].size(), 200u);
  c.kv_policy = {};
  Metrics metrics;
  EngineCore core(c, metrics);
  auto stream = std::make_shared<RequestStream>(1);
  core.add({stream}, greedy_request(random_prompt(82, 30), 200), SteadyClock::now());
  RequestHandle handle(stream);
  EXPECT_EQ(handle.wait().final.reject, sched::RejectReason::kKvNeverFits);
}

// The policy cannot combine with speculative decoding, nor re-rotation
// with a sharded model (the engine says so at start-up).
TEST(EngineStreamingSame, UnsupportedCombinationsAreRefused) {
  EngineConfig c =
      streaming_engine(testing::tiny_model_path(), kv::streaming_policy(4, 40, kv::KvPositions::kPreserve));
  c.spec.method = spec::SpecMethod::kNgram;
  EXPECT_THROW(c.validate(), Error);
  c.spec = {};
  c.kv_policy.window = 0;
  EXPECT_THROW(c.validate(), Error);
  // A request's own policy: refused when invalid or beside speculation.
  RequestLimits limits;
  limits.n_vocab = 100;
  limits.capacity = sched::SchedulerConfig{}.capacity();
  GenerateRequest r = greedy_request({1, 2, 3}, 4);
  r.kv_policy = kv::KvPolicy{kv::KvPolicyKind::kHeavyHitter, 4, 64, kv::KvPositions::kPreserve, 16};
  ASSERT_TRUE(check_request(r, limits).has_value());
  EXPECT_EQ(check_request(r, limits)->reason, sched::RejectReason::kInvalid);
  r.kv_policy = kv::heavy_hitter_policy(4, 64, 128);
  EXPECT_FALSE(check_request(r, limits).has_value());
  limits.speculation = true;
  ASSERT_TRUE(check_request(r, limits).has_value());
  EXPECT_NE(check_request(r, limits)->message.find("speculative"), std::string::npos);
  limits.speculation = false;
  limits.parallel = true;
  EXPECT_TRUE(check_request(r, limits).has_value());
  r.kv_policy = kv::streaming_policy(4, 64);  // preserve works sharded
  EXPECT_FALSE(check_request(r, limits).has_value());
}

}  // namespace
}  // namespace tokenmill::engine
