// EngineCore driven step by step (no engine thread): exact checks of
// scheduling order, prefix caching and metric bookkeeping.
#include "engine/engine_core.h"

#include <gtest/gtest.h>

#include "engine/test_util.h"
#include "util/error.h"

namespace tokenmill::engine {
namespace {

using testing::greedy_request;
using testing::random_prompt;
using testing::tiny_config;
using Driver = testing::CoreDriver;

GenerateRequest with_priority(GenerateRequest r, Priority p) {
  r.priority = p;
  return r;
}

// Two low-priority requests fill the batch (max_seqs 2); then a low and a
// high one arrive, low first. When the first slot frees, the high one runs
// before the earlier low one; with equal classes FCFS decides instead.
TEST(EngineCoreTest, HighPriorityOvertakesWaitingLowPriority) {
  for (Priority late : {Priority::kHigh, Priority::kLow}) {
    EngineConfig config = tiny_config();
    config.max_seqs = 2;
    Driver d(config);
    RequestHandle l1 = d.add(with_priority(greedy_request(random_prompt(1, 8), 5), Priority::kLow));
    RequestHandle l2 = d.add(with_priority(greedy_request(random_prompt(2, 8), 20), Priority::kLow));
    d.core().step();  // both prefill: the batch is full
    RequestHandle l3 = d.add(with_priority(greedy_request(random_prompt(3, 8), 5), Priority::kLow));
    RequestHandle h = d.add(with_priority(greedy_request(random_prompt(4, 8), 5), late));
    d.run_to_end();
    const FinalEvent f1 = l1.wait().final, f2 = l2.wait().final, f3 = l3.wait().final, fh = h.wait().final;
    EXPECT_EQ(f1.first_scheduled_step, 0);
    EXPECT_EQ(f2.first_scheduled_step, 0);
    // l1 decodes 4 more tokens (steps 1..4) and leaves; its slot is taken at step 5.
    if (late == Priority::kHigh) {
      EXPECT_EQ(fh.first_scheduled_step, 5);
      EXPECT_GT(f3.first_scheduled_step, fh.first_scheduled_step);
    } else {
      EXPECT_EQ(f3.first_scheduled_step, 5);
      EXPECT_GT(fh.first_scheduled_step, f3.first_scheduled_step);
    }
  }
}

TEST(EngineCoreTest, CancelStopsARunningRequestAndFreesItsBlocks) {
  Driver d(tiny_config());
  RequestHandle h = d.add(greedy_request(random_prompt(1, 40), 100));
  for (int i = 0; i < 5; ++i) d.core().step();  // two prefill chunks of <= 32 + 3 decodes
  EXPECT_GT(d.metrics().kv_blocks_used, 0);
  h.cancel();  // no engine thread here: the core hears of it directly
  d.core().cancel(h.id());
  d.core().step();
  EXPECT_FALSE(d.core().has_work());
  const GenerationResult r = h.wait();
  EXPECT_EQ(r.final.reason, FinishReason::kCancelled);
  EXPECT_EQ(r.tokens.size(), 4u);
  const MetricsSnapshot m = d.metrics();
  EXPECT_EQ(m.kv_blocks_used, 0);
  EXPECT_EQ(m.kv_blocks_evictable, 2);  // the prompt's two full blocks stay in the prefix cache
  EXPECT_EQ(m.kv_blocks_free + m.kv_blocks_evictable, m.kv_blocks_total);
}

TEST(EngineCoreTest, PrefixCacheHitSkipsPrefillWithinATenant) {
  EngineConfig config = tiny_config();
  config.prefix_isolation = PrefixIsolation::kTenant;
  Driver d(config);
  std::unique_ptr<model::Model> m = model::Model::load(testing::tiny_model_path());
  const std::vector<int32_t> shared = random_prompt(7, 48);  // three full blocks
  std::vector<int32_t> a = shared, b = shared;
  const std::vector<int32_t> tail_a = random_prompt(8, 16), tail_b = random_prompt(9, 16);
  a.insert(a.end(), tail_a.begin(), tail_a.end());
  b.insert(b.end(), tail_b.begin(), tail_b.end());

  GenerateRequest ra = greedy_request(a, 4);
  ra.tenant = "x";
  RequestHandle ha = d.add(ra);
  d.run_to_end();
  EXPECT_EQ(ha.wait().final.usage.cached_prompt_tokens, 0);

  GenerateRequest rb = greedy_request(b, 4);
  rb.tenant = "x";
  const uint64_t prefill_before = d.metrics().prefill_tokens;
  RequestHandle hb = d.add(rb);
  d.run_to_end();
  const GenerationResult result_b = hb.wait();
  EXPECT_EQ(result_b.final.usage.cached_prompt_tokens, 48);
  EXPECT_EQ(d.metrics().prefill_tokens - prefill_before, 16u);      // only the distinct suffix ran
  EXPECT_EQ(result_b.tokens, testing::reference_greedy(*m, b, 4));  // the cached K/V are right
  EXPECT_EQ(d.metrics().prefix_cache_hit_tokens, 48u);

  rb.tenant = "y";  // another tenant: no sharing
  RequestHandle hc = d.add(rb);
  d.run_to_end();
  const GenerationResult result_c = hc.wait();
  EXPECT_EQ(result_c.final.usage.cached_prompt_tokens, 0);
  EXPECT_EQ(result_c.tokens, result_b.tokens);
}

TEST(EngineCoreTest, SharedIsolationSharesAcrossTenantsAndOffDisablesIt) {
  for (bool enabled : {true, false}) {
    EngineConfig config = tiny_config();
    config.prefix_cache = enabled;
    Driver d(config);
    const std::vector<int32_t> prompt = random_prompt(11, 40);
    GenerateRequest r = greedy_request(prompt, 3);
    r.tenant = "x";
    RequestHandle first = d.add(r);
    d.run_to_end();
    r.tenant = "y";
    RequestHandle second = d.add(r);
    d.run_to_end();
    EXPECT_EQ(first.wait().final.usage.cached_prompt_tokens, 0);
    // (40 - 1) / 16 = 2 full blocks may be reused; the last token is always computed.
    EXPECT_EQ(second.wait().final.usage.cached_prompt_tokens, enabled ? 32 : 0);
  }
}

TEST(EngineCoreTest, MetricsAddUp) {
  EngineConfig config = tiny_config();
  config.prefix_cache = false;
  Driver d(config);
  std::vector<RequestHandle> handles;
  const int64_t lengths[] = {5, 17, 33, 64};
  for (int i = 0; i < 4; ++i) {
    handles.push_back(
        d.add(greedy_request(random_prompt(20 + static_cast<uint64_t>(i), static_cast<size_t>(lengths[i])), 3 + i)));
  }
  GenerateRequest expired = greedy_request(random_prompt(30, 10), 5);
  expired.timeout = std::chrono::milliseconds(0);
  handles.push_back(d.add(expired));
  d.run_to_end();

  int64_t prompt = 0, completion = 0, decodes = 0, with_tokens = 0;
  for (RequestHandle& h : handles) {
    const FinalEvent f = h.wait().final;
    if (f.usage.completion_tokens > 0) {
      prompt += f.usage.prompt_tokens;
      ++with_tokens;
      decodes += f.usage.completion_tokens - 1;
    }
    completion += f.usage.completion_tokens;
  }
  const MetricsSnapshot m = d.metrics();
  EXPECT_EQ(m.requests_submitted, 5u);
  EXPECT_EQ(m.requests_finished_total(), 5u);
  EXPECT_EQ(m.requests_finished[static_cast<size_t>(FinishReason::kLength)], 4u);
  // Its deadline passed while it was queued: a rejection.
  EXPECT_EQ(m.requests_finished[static_cast<size_t>(FinishReason::kRejected)], 1u);
  EXPECT_EQ(m.requests_rejected[static_cast<size_t>(RejectReason::kDeadlineExpired)], 1u);
  EXPECT_EQ(completion, 3 + 4 + 5 + 6);
  EXPECT_EQ(m.generated_tokens, static_cast<uint64_t>(completion));
  EXPECT_EQ(m.prefill_tokens, static_cast<uint64_t>(prompt));  // no cache, no preemption
  EXPECT_EQ(prompt, 5 + 17 + 33 + 64);
  EXPECT_EQ(m.decode_tokens, static_cast<uint64_t>(decodes));
  EXPECT_EQ(m.ttft_ms.count, static_cast<uint64_t>(with_tokens));
  EXPECT_EQ(m.tpot_ms.count, 4u);
  EXPECT_EQ(m.e2e_ms.count, 4u);  // rejections record no latencies
  EXPECT_EQ(m.itl_ms.count, static_cast<uint64_t>(decodes));
  EXPECT_EQ(m.steps, static_cast<uint64_t>(d.core().steps()));
  EXPECT_EQ(m.step_ms.count, m.steps);
  EXPECT_EQ(m.running, 0);
  EXPECT_EQ(m.waiting, 0);
  EXPECT_EQ(m.kv_blocks_used, 0);
  EXPECT_EQ(m.kv_blocks_free, m.kv_blocks_total);
  EXPECT_GT(m.kv_blocks_high_water, 0);
}

TEST(EngineCoreTest, AddRefusesWhatCheckRequestRefuses) {
  Driver d(tiny_config());
  GenerateRequest bad = greedy_request({1, 2}, 3);
  bad.sampling.temperature = -1;
  RequestHandle h = d.add(bad);
  EXPECT_TRUE(h.done());
  const FinalEvent f = h.wait().final;
  EXPECT_EQ(f.reason, FinishReason::kRejected);
  EXPECT_EQ(f.reject, RejectReason::kInvalid);
  EXPECT_NE(f.error.find("temperature"), std::string::npos) << f.error;
  EXPECT_FALSE(d.core().has_work());
}

TEST(EngineCoreTest, CheckRequestNamesTheProblem) {
  RequestLimits limits;
  limits.n_vocab = 100;
  limits.capacity.max_model_len = 64;
  limits.capacity.kv_groups = {{2, 0}};
  limits.capacity.block_size = 16;
  limits.capacity.max_batch_tokens = 20;
  limits.capacity.prefill_chunk = 0;
  EXPECT_FALSE(check_request(greedy_request({1, 2, 3}, 4), limits).has_value());
  // 20 + 14 = 34 tokens; 33 positions need 3 blocks of 16 > 2.
  std::optional<Refusal> r = check_request(greedy_request(std::vector<int32_t>(20, 1), 14), limits);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->reason, RejectReason::kKvNeverFits);
  // 21 prompt tokens exceed max_batch_tokens without chunking.
  r = check_request(greedy_request(std::vector<int32_t>(21, 1), 1), limits);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->reason, RejectReason::kPromptTooLong);
  EXPECT_NE(r->message.find("max_batch_tokens"), std::string::npos);
  r = check_request(greedy_request(std::vector<int32_t>(64, 1), 1), limits);  // the prompt fills the context
  ASSERT_TRUE(r);
  EXPECT_EQ(r->reason, RejectReason::kPromptTooLong);
  EXPECT_NE(r->message.find("leaves no room"), std::string::npos) << r->message;
  r = check_request(greedy_request(std::vector<int32_t>(10, 1), 60), limits);  // 70 > 64
  ASSERT_TRUE(r);
  EXPECT_EQ(r->reason, RejectReason::kContextExceeded);
  GenerateRequest stops = greedy_request({1}, 1);
  stops.sampling.stop = {"x"};
  r = check_request(stops, limits);  // no tokenizer
  ASSERT_TRUE(r);
  EXPECT_EQ(r->reason, RejectReason::kInvalid);
  GenerateRequest top = greedy_request({1}, 1);
  top.top_logprobs = kMaxTopLogprobs + 1;
  EXPECT_EQ(check_request(top, limits)->reason, RejectReason::kInvalid);
}

// The engine reports its KV layout (start-up log, /metrics) and keys the
// prefix cache on the dtype it really runs. tiny: 2 layers, 2 KV heads of
// 16 = 32-wide rows: f16 64 bytes, q8_0 one 32-group = 2 + 32 bytes, q4_0
// 2 + 16 bytes.
TEST(EngineCoreTest, KvLayoutAndNamespaceFollowTheDtype) {
  const struct {
    kv::KvDtype dtype;
    const char* name;
    int64_t row_bytes;
  } cases[] = {{kv::KvDtype::F32, "f32", 128},  {kv::KvDtype::F16, "f16", 64},
               {kv::KvDtype::Q8_0, "q8_0", 34}, {kv::KvDtype::FP8_E4M3, "fp8_e4m3", 34},
               {kv::KvDtype::Q4_0, "q4_0", 18}, {kv::KvDtype::Q4_0_KC, "q4_0_kc", 18}};
  for (const auto& c : cases) {
    EngineConfig config = tiny_config();
    config.kv_dtype = c.dtype;
    Driver d(config);
    EXPECT_EQ(d.core().kv_bytes_per_token(), 2 * 2 * c.row_bytes) << c.name;
    EXPECT_EQ(d.core().cache_namespace().kv_dtype, c.name);
    const MetricsSnapshot m = d.metrics();
    EXPECT_EQ(m.kv_dtype, c.name);
    EXPECT_EQ(m.kv_bytes_per_token, 2 * 2 * c.row_bytes);
    EXPECT_EQ(m.kv_bytes_total, d.core().kv_bytes());
    EXPECT_GE(m.kv_bytes_total, 64 * 16 * m.kv_bytes_per_token);  // 64 blocks of 16 positions
    // q4_0_kc's key scales are measured at start, before any request.
    EXPECT_EQ(d.core().model().key_scales().empty(), c.dtype != kv::KvDtype::Q4_0_KC) << c.name;
  }
}

// Writes zeros for every product and counts them: a generation that comes
// out all id 0 (zero logits, ties to the lower id) proves the engine's
// forward passes go through the factory's hook.
class ZeroHook : public model::MatmulHook {
 public:
  explicit ZeroHook(int64_t* calls) : calls_(calls) {}
  bool matmul(const kernels::WeightView& w, const float*, int64_t num_tokens, float* y, ThreadPool&) override {
    std::fill(y, y + num_tokens * w.rows, 0.0f);
    ++*calls_;
    return true;
  }

 private:
  int64_t* calls_;
};

TEST(EngineCoreTest, MatmulHookFactoryRoutesEveryProduct) {
  int64_t calls = 0;
  const model::Model* seen = nullptr;
  EngineConfig config = tiny_config();
  config.matmul_hook_factory = [&](const model::Model& m) -> std::unique_ptr<model::MatmulHook> {
    seen = &m;
    return std::make_unique<ZeroHook>(&calls);
  };
  Driver d(config);
  EXPECT_EQ(seen, &d.core().model());
  ASSERT_NE(d.core().matmul_hook(), nullptr);
  RequestHandle h = d.add(greedy_request(random_prompt(5, 9), 4));
  d.run_to_end();
  EXPECT_EQ(h.wait().tokens, std::vector<int32_t>(4, 0));
  // 7 products per layer and the classifier, per forward pass (4 passes:
  // prefill, then 3 decodes).
  EXPECT_EQ(calls, 4 * (2 * 7 + 1));

  config.matmul_hook_factory = [](const model::Model&) -> std::unique_ptr<model::MatmulHook> {
    fail("the w8a8 runtime needs Q8_0 weight matrices");
  };
  EXPECT_THROW(Driver bad(config), Error);
  config.matmul_hook_factory = [](const model::Model&) { return std::unique_ptr<model::MatmulHook>(); };
  Driver dense(config);
  EXPECT_EQ(dense.core().matmul_hook(), nullptr);
}

}  // namespace
}  // namespace tokenmill::engine
