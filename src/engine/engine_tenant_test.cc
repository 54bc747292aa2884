// The engine's serving-hardening controls: pausing a request (backpressure),
// per-tenant limits, and the prefix-cache metrics by tenant and miss reason.
#include <gtest/gtest.h>

#include <chrono>
#include <numeric>
#include <thread>

#include "engine/engine.h"
#include "engine/engine_core.h"
#include "engine/test_util.h"

namespace tokenmill::engine {
namespace {

using testing::greedy_request;
using testing::random_prompt;
using testing::tiny_config;
using Driver = testing::CoreDriver;

GenerateRequest for_tenant(GenerateRequest r, std::string tenant) {
  r.tenant = std::move(tenant);
  return r;
}

// Takes every token event available now (never the final event).
std::vector<int32_t> take_tokens(RequestHandle& h) {
  std::vector<int32_t> tokens;
  while (true) {
    std::optional<StreamEvent> e = h.try_next();
    if (!e) break;
    EXPECT_FALSE(e->is_final()) << "the request ended early";
    if (e->is_final()) break;
    tokens.push_back(e->token->token);
  }
  return tokens;
}

void append(std::vector<int32_t>& to, const std::vector<int32_t>& more) {
  to.insert(to.end(), more.begin(), more.end());
}

TEST(EnginePause, APausedRequestMakesNoTokensWhileAnotherDecodes) {
  Driver d(tiny_config());
  std::unique_ptr<model::Model> m = model::Model::load(testing::tiny_model_path());
  const std::vector<int32_t> pa = random_prompt(1, 8), pb = random_prompt(2, 8);
  RequestHandle a = d.add(greedy_request(pa, 12));
  RequestHandle b = d.add(greedy_request(pb, 12));
  d.core().step();  // both prefill: a first token each
  std::vector<int32_t> out_a = take_tokens(a), out_b = take_tokens(b);
  ASSERT_EQ(out_a.size(), 1u);
  d.core().set_paused(a.id(), true);
  EXPECT_EQ(d.metrics().paused, 1);
  for (int i = 0; i < 5; ++i) d.core().step();
  EXPECT_TRUE(take_tokens(a).empty());
  append(out_b, take_tokens(b));
  EXPECT_EQ(out_b.size(), 6u);
  d.core().set_paused(a.id(), false);
  EXPECT_EQ(d.metrics().paused, 0);
  d.run_to_end();
  append(out_a, a.wait().tokens);
  append(out_b, b.wait().tokens);
  EXPECT_EQ(out_a, testing::reference_greedy(*m, pa, 12));  // as if never paused
  EXPECT_EQ(out_b, testing::reference_greedy(*m, pb, 12));
}

// Waits (up to 10 s) until `pred` holds.
template <typename Pred>
bool eventually(Pred pred) {
  for (int i = 0; i < 1000 && !pred(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return pred();
}

// Through the handle and the inbox, and a drain resumes a paused request.
// Each pause is sent while engine.pause() holds the loop parked and before
// the request was submitted, so it is taken before the request can step:
// a pause sent after a running request's first token raced its end (the
// tiny model makes 240 tokens in a few ms; a loaded CI machine lost that
// race). Pausing in the middle of a decode is the core's, tested above
// step by step.
TEST(EnginePause, TheHandlePausesThroughTheInboxAndADrainResumes) {
  Engine engine(tiny_config());
  const auto submit_paused = [&] {
    engine.pause();
    RequestHandle h = engine.submit(greedy_request(random_prompt(3, 8), 240));
    h.set_paused(true);
    engine.resume();
    return h;
  };
  RequestHandle h = submit_paused();
  ASSERT_TRUE(eventually([&] { return engine.metrics().paused == 1; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_TRUE(take_tokens(h).empty());
  EXPECT_FALSE(h.done());
  h.set_paused(false);
  ASSERT_TRUE(eventually([&] { return engine.metrics().paused == 0; }));
  ASSERT_TRUE(h.next().has_value());  // unpaused, it runs
  RequestHandle parked = submit_paused();
  ASSERT_TRUE(eventually([&] { return engine.metrics().paused == 1; }));
  engine.stop(Engine::StopMode::kDrain);
  const GenerationResult first = h.wait(), second = parked.wait();
  EXPECT_EQ(first.final.reason, FinishReason::kLength);
  EXPECT_EQ(first.tokens.size() + 1, 240u);  // the one taken by next()
  EXPECT_EQ(second.final.reason, FinishReason::kLength);
  EXPECT_EQ(second.tokens.size(), 240u);
}

TEST(EngineTenants, RunningAndWaitingLimitsPerTenant) {
  EngineConfig config = tiny_config();
  config.tenant_limits["a"] = TenantLimits{.max_running = 1, .max_waiting = 1};
  Driver d(config);
  std::vector<RequestHandle> a, b;
  for (uint64_t i = 0; i < 4; ++i) a.push_back(d.add(for_tenant(greedy_request(random_prompt(i, 8), 3), "a")));
  for (uint64_t i = 0; i < 2; ++i) b.push_back(d.add(for_tenant(greedy_request(random_prompt(10 + i, 8), 3), "b")));
  d.run_to_end();
  const FinalEvent a0 = a[0].wait().final, a1 = a[1].wait().final;
  EXPECT_EQ(a0.reason, FinishReason::kLength);
  EXPECT_EQ(a1.reason, FinishReason::kLength);
  EXPECT_EQ(a0.first_scheduled_step, 0);
  EXPECT_EQ(a1.first_scheduled_step, 3);  // after a0's 3 steps
  for (size_t i = 2; i < 4; ++i) {
    const FinalEvent f = a[i].wait().final;
    EXPECT_EQ(f.reject, RejectReason::kQueueFull);
    EXPECT_NE(f.error.find("tenant \"a\""), std::string::npos) << f.error;
  }
  for (RequestHandle& h : b) EXPECT_EQ(h.wait().final.first_scheduled_step, 0);
}

uint64_t misses(const PrefixStats& t, kv::PrefixMissReason r) { return t.miss_tokens[static_cast<size_t>(r)]; }

const PrefixStats* find_tenant(const MetricsSnapshot& m, const std::string& tenant) {
  for (const PrefixStats& t : m.prefix_by_tenant) {
    if (t.label == tenant) return &t;
  }
  return nullptr;
}

// Per tenant, with isolation: x misses (no overlap), y finds x's blocks
// isolated, x hits them, a prompt-logprobs request bypasses. The last
// block's 8 tokens are beyond the lookup's reach. Every prompt token is
// counted once.
TEST(EnginePrefixMetrics, HitsAndMissReasonsByTenant) {
  EngineConfig config = tiny_config();
  config.prefix_isolation = PrefixIsolation::kTenant;
  Driver d(config);
  const std::vector<int32_t> prompt = random_prompt(5, 40);
  d.add(for_tenant(greedy_request(prompt, 2), "x"));
  d.run_to_end();
  d.add(for_tenant(greedy_request(prompt, 2), "y"));
  d.run_to_end();
  d.add(for_tenant(greedy_request(prompt, 2), "x"));
  d.run_to_end();
  GenerateRequest scored = for_tenant(greedy_request(prompt, 1), "x");
  scored.prompt_logprobs = 0;
  d.add(scored);
  d.run_to_end();
  const MetricsSnapshot m = d.metrics();
  const PrefixStats* x = find_tenant(m, "x");
  const PrefixStats* y = find_tenant(m, "y");
  ASSERT_NE(x, nullptr);
  ASSERT_NE(y, nullptr);
  EXPECT_EQ(x->hit_tokens, 32u);
  EXPECT_EQ(misses(*x, kv::PrefixMissReason::kNoOverlap), 32u);
  EXPECT_EQ(misses(*x, kv::PrefixMissReason::kPartialBlock), 16u);
  EXPECT_EQ(misses(*x, kv::PrefixMissReason::kLogprobsBypass), 40u);
  EXPECT_EQ(y->hit_tokens, 0u);
  EXPECT_EQ(misses(*y, kv::PrefixMissReason::kIsolated), 32u);
  EXPECT_EQ(misses(*y, kv::PrefixMissReason::kPartialBlock), 8u);
  const auto sum = [](const PrefixStats& t) {
    return t.hit_tokens + std::accumulate(t.miss_tokens.begin(), t.miss_tokens.end(), uint64_t{0});
  };
  EXPECT_EQ(sum(*x), 3 * 40u);
  EXPECT_EQ(sum(*y), 40u);
  EXPECT_EQ(sum(*x) + sum(*y), m.prompt_tokens);
  EXPECT_GT(m.prefill_seconds_per_token, 0.0);
  EXPECT_GT(m.prefix_cache_saved_prefill_seconds, 0.0);
  EXPECT_GT(m.prefix_cache_blocks, 0);
}

}  // namespace
}  // namespace tokenmill::engine
