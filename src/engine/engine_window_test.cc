// The sliding-window KV pool end to end: a synthetic gemma3 (6 layers:
// layers 0-4 use a window of 8 positions, layer 5 is global) served with and
// without the separate window pool gives the same greedy tokens as an
// engine-free reference, for prompts + generations many windows long, with
// chunked prefill, preemption and prefix-cache hits; and the window pool's
// use stays bounded while a sequence grows. Parallel samples (n > 1) fork
// both pools' block tables: greedy samples equal the single continuation,
// seeded ones are reproducible, and cancelling every sample frees both pools.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>

#include "engine/engine_core.h"
#include "engine/test_util.h"

namespace tokenmill::engine {
namespace {

using testing::greedy_request;
using testing::random_prompt;
using testing::with_n;

constexpr int64_t kWindow = 8;  // the tiny preset's sliding window

// Paths of the models written by synth_model_path, removed at exit.
std::map<std::string, std::string>& written_models() {
  static auto* paths = [] {
    auto* m = new std::map<std::string, std::string>();
    std::atexit([] {
      std::error_code ec;
      for (const auto& [_, path] : written_models()) std::filesystem::remove(path, ec);
    });
    return m;
  }();
  return *paths;
}

// A synthetic F32 model of `arch` with `n_layer` layers, written once per
// process under `tag`.
const std::string& synth_model_path(model::SynthArch arch, int64_t n_layer, uint64_t seed, const char* tag) {
  std::map<std::string, std::string>& paths = written_models();
  auto it = paths.find(tag);
  if (it == paths.end()) {
    const std::filesystem::path p = std::filesystem::temp_directory_path() /
                                    (std::string("tokenmill_") + tag + "_test_" + std::to_string(::getpid()) + ".gguf");
    model::SynthOptions o;
    o.arch = arch;
    o.preset = "tiny";
    o.overrides.n_layer = n_layer;
    o.format = *model::parse_weight_format("F32");
    o.seed = seed;
    o.num_threads = 1;
    model::write_synth_model(o, p.string());
    it = paths.emplace(tag, p.string()).first;
  }
  return it->second;
}

// A synthetic gemma3 of 6 layers: five local layers with the window of 8, one global.
const std::string& gemma_model_path() { return synth_model_path(model::SynthArch::kGemma3, 6, 11, "window"); }

// A synthetic gemma2 of 4 layers: the even ones (0, 2) use the window of 8,
// the odd ones are global.
const std::string& gemma2_model_path() { return synth_model_path(model::SynthArch::kGemma2, 4, 12, "window2"); }

EngineConfig gemma_config(bool window_pool, int64_t prefill_chunk, int64_t kv_blocks) {
  EngineConfig c = testing::tiny_config();
  c.model_path = gemma_model_path();
  c.block_size = 4;
  c.kv_num_blocks = kv_blocks;
  c.max_seqs = 4;
  c.max_batch_tokens = 64;
  c.prefill_chunk = prefill_chunk;
  c.kv_window_pool = window_pool;
  return c;
}

struct RunResult {
  std::vector<std::vector<int32_t>> tokens;
  sched::SchedulerStats stats;
  uint64_t cow_copies = 0;
};

// Adds each request as one sample, with ids from `id` on.
void add_singles(EngineCore& core, const std::vector<GenerateRequest>& requests, RequestId& id,
                 std::vector<RequestHandle>& handles) {
  for (const GenerateRequest& r : requests) {
    auto stream = std::make_shared<RequestStream>(id++);
    core.add({stream}, r, SteadyClock::now());
    handles.emplace_back(stream);
  }
}

// Steps the core until idle; every request must end by length.
RunResult run_to_end(EngineCore& core, Metrics& metrics, std::vector<RequestHandle>& handles) {
  while (core.has_work()) core.step();
  RunResult run;
  for (RequestHandle& h : handles) {
    const GenerationResult r = h.wait();
    EXPECT_EQ(r.final.reason, FinishReason::kLength) << r.final.error;
    run.tokens.push_back(r.tokens);
  }
  run.stats = core.scheduler_stats();
  run.cow_copies = metrics.snapshot().cow_copies;
  return run;
}

RunResult run_all(const EngineConfig& config, const std::vector<GenerateRequest>& requests) {
  Metrics metrics;
  EngineCore core(config, metrics);
  std::vector<RequestHandle> handles;
  RequestId id = 1;
  add_singles(core, requests, id, handles);
  RunResult run = run_to_end(core, metrics, handles);
  EXPECT_EQ(metrics.snapshot().kv_window_blocks_total, run.stats.kv_window_blocks_total);
  return run;
}

TEST(EngineWindowTest, TheModelHasBothLayerKinds) {
  const std::unique_ptr<model::Model> m = model::Model::load(gemma_model_path());
  EXPECT_EQ(m->config().sliding_window, kWindow);
  EXPECT_TRUE(m->has_window_group());
  EXPECT_EQ(m->kv_geometry(4, kv::KvDtype::F16, model::KvGroup::kWindow).n_layer, 5);
  EXPECT_EQ(m->kv_geometry(4, kv::KvDtype::F16, model::KvGroup::kFull).n_layer, 1);
}

// Three prompts of 30-45 tokens generating 50 each (10+ windows), two of
// them sharing a 24-token prefix, each in a pool that fits all of them
// (no preemption) or only about one and a half (preemption + recompute).
TEST(EngineWindowTest, GreedyTokensMatchTheReferenceWithAndWithoutTheWindowPool) {
  std::vector<GenerateRequest> requests;
  for (uint64_t i = 0; i < 3; ++i) requests.push_back(greedy_request(random_prompt(40 + i, 30 + 7 * i), 50));
  std::copy_n(requests[0].prompt.begin(), 24, requests[2].prompt.begin());
  const std::unique_ptr<model::Model> m = model::Model::load(gemma_model_path());
  std::vector<std::vector<int32_t>> want;
  for (const GenerateRequest& r : requests) want.push_back(testing::reference_greedy(*m, r.prompt, r.max_tokens));

  for (int64_t chunk : {int64_t{0}, int64_t{5}, int64_t{16}}) {
    for (int64_t blocks : {int64_t{96}, int64_t{36}}) {
      for (bool window_pool : {false, true}) {
        SCOPED_TRACE(::testing::Message()
                     << "chunk " << chunk << " blocks " << blocks << " window pool " << window_pool);
        const RunResult run = run_all(gemma_config(window_pool, chunk, blocks), requests);
        for (size_t i = 0; i < requests.size(); ++i) EXPECT_EQ(run.tokens[i], want[i]) << "request " << i;
        if (blocks == 36) {
          EXPECT_GT(run.stats.num_preemptions, 0);
        }
        EXPECT_EQ(run.stats.kv_blocks_used, 0);
        EXPECT_EQ(run.stats.kv_window_blocks_used, 0);
        EXPECT_EQ(run.stats.kv_window_blocks_total > 0, window_pool);
      }
    }
  }
}

// Gemma 2's alternating layers go through the same two pools: two prompts
// generating 40 tokens each (5+ windows), chunked or not.
TEST(EngineWindowTest, Gemma2GreedyTokensMatchTheReferenceWithAndWithoutTheWindowPool) {
  const std::unique_ptr<model::Model> m = model::Model::load(gemma2_model_path());
  EXPECT_EQ(m->config().sliding_window, kWindow);
  EXPECT_EQ(m->kv_geometry(4, kv::KvDtype::F16, model::KvGroup::kWindow).n_layer, 2);
  EXPECT_EQ(m->kv_geometry(4, kv::KvDtype::F16, model::KvGroup::kFull).n_layer, 2);
  std::vector<GenerateRequest> requests;
  for (uint64_t i = 0; i < 2; ++i) requests.push_back(greedy_request(random_prompt(60 + i, 30 + 7 * i), 40));
  std::vector<std::vector<int32_t>> want;
  for (const GenerateRequest& r : requests) want.push_back(testing::reference_greedy(*m, r.prompt, r.max_tokens));
  for (int64_t chunk : {int64_t{0}, int64_t{5}}) {
    for (bool window_pool : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "chunk " << chunk << " window pool " << window_pool);
      EngineConfig config = gemma_config(window_pool, chunk, 96);
      config.model_path = gemma2_model_path();
      const RunResult run = run_all(config, requests);
      for (size_t i = 0; i < requests.size(); ++i) EXPECT_EQ(run.tokens[i], want[i]) << "request " << i;
      EXPECT_EQ(run.stats.kv_window_blocks_total > 0, window_pool);
    }
  }
}

// One sequence: a 20-token prompt and 150 generated tokens (21 windows).
// After every decode step the window pool holds at most
// ceil(window / block_size) + 1 = 3 blocks, while the full-attention pool
// holds one block per 4 positions.
TEST(EngineWindowTest, WindowPoolUseStaysBoundedWhileTheSequenceGrows) {
  Metrics metrics;
  EngineCore core(gemma_config(true, 8, 64), metrics);
  auto stream = std::make_shared<RequestStream>(1);
  core.add({stream}, greedy_request(random_prompt(7, 20), 150), SteadyClock::now());
  RequestHandle handle(stream);
  const int64_t bound = (kWindow + 3) / 4 + 1;
  int decode_steps = 0;
  int64_t max_window_used = 0, max_full_used = 0;
  for (int step = 0; core.has_work(); ++step) {
    core.step();
    const sched::SchedulerStats s = core.scheduler_stats();
    if (step >= 3 && core.has_work()) {  // the prompt took 3 chunks of <= 8
      ASSERT_LE(s.kv_window_blocks_used, bound) << "step " << step;
      max_window_used = std::max(max_window_used, s.kv_window_blocks_used);
      ++decode_steps;
    }
    max_full_used = std::max(max_full_used, s.kv_blocks_used);
  }
  EXPECT_EQ(decode_steps, 148);  // steps 3..150; step 151 ends the sequence
  EXPECT_EQ(max_full_used, 42);  // positions 0..167 after step 150 (step 151 frees them)
  EXPECT_EQ(max_window_used, bound);
  EXPECT_EQ(handle.wait().tokens.size(), 150u);
  EXPECT_EQ(core.scheduler_stats().kv_window_blocks_used, 0);
  EXPECT_LE(core.scheduler_stats().kv_window_blocks_high_water, (kWindow - 1 + 8 + 3) / 4 + 1);
}

// Runs `request` as request.n samples on a fresh core (preceded by `others`,
// each one sample), step by step. Returns every sample's tokens, then the
// others', and the core's final gauges.
RunResult run_samples(const EngineConfig& config, const GenerateRequest& request,
                      const std::vector<GenerateRequest>& others = {}) {
  Metrics metrics;
  EngineCore core(config, metrics);
  std::vector<std::shared_ptr<RequestStream>> streams;
  std::vector<RequestHandle> handles;
  RequestId id = 1;
  for (int k = 0; k < request.n; ++k) {
    streams.push_back(std::make_shared<RequestStream>(id++));
    handles.emplace_back(streams.back());
  }
  core.add(streams, request, SteadyClock::now());
  add_singles(core, others, id, handles);
  return run_to_end(core, metrics, handles);
}

// A 30-token prompt (7 full blocks of 4 + 2 positions) in chunks of 5, then
// 40 tokens (5 windows) for each of 3 samples. The forks share the
// half-filled block 7 in both pools; the first decode copies it for two of
// the three in each pool (4 copies with the window pool, 2 without). With a
// 44-block pool and a competing request the forks are preempted and
// recomputed (both tables freed and rebuilt) and still give the reference.
TEST(EngineWindowForkTest, GreedySamplesEqualTheSingleContinuation) {
  const std::vector<int32_t> prompt = random_prompt(50, 30);
  const std::vector<int32_t> other_prompt = random_prompt(51, 30);
  const std::unique_ptr<model::Model> m = model::Model::load(gemma_model_path());
  const std::vector<int32_t> want = testing::reference_greedy(*m, prompt, 40);
  const std::vector<int32_t> other_want = testing::reference_greedy(*m, other_prompt, 40);
  for (bool window_pool : {true, false}) {
    SCOPED_TRACE(::testing::Message() << "window pool " << window_pool);
    const RunResult one = run_samples(gemma_config(window_pool, 5, 96), greedy_request(prompt, 40));
    ASSERT_EQ(one.tokens.size(), 1u);
    EXPECT_EQ(one.tokens[0], want);
    const RunResult three = run_samples(gemma_config(window_pool, 5, 96), with_n(greedy_request(prompt, 40), 3));
    ASSERT_EQ(three.tokens.size(), 3u);
    for (const std::vector<int32_t>& t : three.tokens) EXPECT_EQ(t, one.tokens[0]);
    EXPECT_EQ(three.cow_copies, window_pool ? 4u : 2u);
    EXPECT_EQ(three.stats.kv_blocks_used, 0);
    EXPECT_EQ(three.stats.kv_window_blocks_used, 0);
    EXPECT_EQ(three.stats.kv_window_blocks_total > 0, window_pool);

    const RunResult tight = run_samples(gemma_config(window_pool, 5, 44), with_n(greedy_request(prompt, 40), 3),
                                        {greedy_request(other_prompt, 40)});
    ASSERT_EQ(tight.tokens.size(), 4u);
    for (size_t k = 0; k < 3; ++k) EXPECT_EQ(tight.tokens[k], want) << "sample " << k;
    EXPECT_EQ(tight.tokens[3], other_want);
    EXPECT_GT(tight.stats.num_preemptions, 0);
    EXPECT_EQ(tight.stats.kv_blocks_used, 0);
    EXPECT_EQ(tight.stats.kv_window_blocks_used, 0);
  }
}

// Temperature 1.5 with a seed: fresh cores give the same three samples,
// and the samples differ from each other.
TEST(EngineWindowForkTest, SeededSamplesAreReproducible) {
  GenerateRequest r = with_n(greedy_request(random_prompt(52, 22), 24), 3);
  r.sampling.temperature = 1.5f;
  r.sampling.seed = 99;
  const RunResult a = run_samples(gemma_config(true, 8, 96), r);
  const RunResult b = run_samples(gemma_config(true, 8, 96), r);
  ASSERT_EQ(a.tokens.size(), 3u);
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_EQ(std::set<std::vector<int32_t>>(a.tokens.begin(), a.tokens.end()).size(), 3u);
  EXPECT_EQ(a.stats.kv_window_blocks_used, 0);
}

// Four samples cancelled after the fork and several decode steps (past the
// first window drop): both pools end with no block in use.
TEST(EngineWindowForkTest, CancellingEverySampleFreesBothPools) {
  Metrics metrics;
  EngineCore core(gemma_config(true, 8, 96), metrics);
  std::vector<std::shared_ptr<RequestStream>> streams;
  std::vector<RequestHandle> handles;
  for (RequestId id = 1; id <= 4; ++id) {
    streams.push_back(std::make_shared<RequestStream>(id));
    handles.emplace_back(streams.back());
  }
  core.add(streams, with_n(greedy_request(random_prompt(53, 18), 60), 4), SteadyClock::now());
  for (int i = 0; i < 12; ++i) core.step();  // 3 prefill chunks, then decodes of all four
  const sched::SchedulerStats mid = core.scheduler_stats();
  EXPECT_EQ(mid.num_running, 4);
  EXPECT_GT(mid.kv_window_blocks_used, 4);
  EXPECT_LE(mid.kv_window_blocks_used, 4 * ((kWindow + 3) / 4 + 1));
  for (RequestId id = 1; id <= 4; ++id) core.cancel(id);
  while (core.has_work()) core.step();
  for (RequestHandle& h : handles) {
    const GenerationResult r = h.wait();
    EXPECT_EQ(r.final.reason, FinishReason::kCancelled);
    EXPECT_EQ(r.tokens.size(), 10u);
  }
  const sched::SchedulerStats end = core.scheduler_stats();
  EXPECT_EQ(end.kv_blocks_used, 0);
  EXPECT_EQ(end.kv_window_blocks_used, 0);
  EXPECT_EQ(metrics.snapshot().kv_window_blocks_used, 0);
}

}  // namespace
}  // namespace tokenmill::engine
