// The engine on a mixture-of-experts model: continuous batching mixes
// sequences whose tokens go to different experts in one grouped step, and
// every sequence must still get the tokens it gets alone; the step metrics
// count each expert's tokens.
#include <gtest/gtest.h>

#include <filesystem>
#include <numeric>

#include "engine/engine.h"
#include "engine/test_util.h"
#include "model/synth.h"

namespace tokenmill::engine {
namespace {

using testing::greedy_request;
using testing::random_prompt;

// A tiny synthetic Qwen3-MoE (8 experts, 2 per token, a 512-token vocabulary).
const std::string& moe_model_path() {
  static const std::string path = [] {
    const std::filesystem::path p =
        std::filesystem::temp_directory_path() / ("tokenmill_engine_moe_" + std::to_string(::getpid()) + ".gguf");
    model::SynthOptions o;
    o.arch = model::SynthArch::kQwen3Moe;
    o.format = *model::parse_weight_format("Q8_0");
    o.seed = 3;
    o.num_threads = 1;
    o.overrides.n_expert = 8;
    o.overrides.n_expert_used = 2;
    model::write_synth_model(o, p.string());
    return p.string();
  }();
  return path;
}

struct RemoveModel : ::testing::Environment {
  void TearDown() override { std::filesystem::remove(moe_model_path()); }
};
const auto* const kRemove = ::testing::AddGlobalTestEnvironment(new RemoveModel);

TEST(EngineMoeTest, BatchedSequencesGetTheirTokensAloneAndExpertsAreCounted) {
  std::vector<std::vector<int32_t>> prompts;
  std::vector<int64_t> lengths;
  for (uint64_t i = 0; i < 12; ++i) {
    prompts.push_back(random_prompt(40 + i, 1 + (i * 29) % 70));
    lengths.push_back(static_cast<int64_t>(1 + (i * 11) % 24));
  }
  std::vector<std::vector<int32_t>> want;
  {
    std::unique_ptr<model::Model> m = model::Model::load(moe_model_path());
    for (size_t i = 0; i < prompts.size(); ++i) want.push_back(testing::reference_greedy(*m, prompts[i], lengths[i]));
  }
  EngineConfig c = testing::tiny_config();
  c.model_path = moe_model_path();
  Engine engine(c);
  engine.pause();
  std::vector<RequestHandle> handles;
  for (size_t i = 0; i < prompts.size(); ++i) handles.push_back(engine.submit(greedy_request(prompts[i], lengths[i])));
  engine.resume();
  for (size_t i = 0; i < handles.size(); ++i) EXPECT_EQ(handles[i].wait().tokens, want[i]) << "request " << i;

  const MetricsSnapshot m = engine.metrics();
  ASSERT_EQ(m.expert_tokens.size(), 8u);
  const uint64_t visits = std::accumulate(m.expert_tokens.begin(), m.expert_tokens.end(), uint64_t{0});
  // Every token computed visits 2 experts in each of the 2 layers.
  EXPECT_EQ(visits, (m.prefill_tokens + m.decode_tokens) * 2 * 2);
  EXPECT_GT(m.expert_steps, 0u);
  const double mean_imbalance = m.expert_imbalance_sum / static_cast<double>(m.expert_steps);
  EXPECT_GE(mean_imbalance, 1.0);
  EXPECT_LE(mean_imbalance, 8.0 / 2.0);
}

TEST(EngineMoeTest, ImbalanceOfKnownLoads) {
  const int64_t even[] = {3, 3, 3, 3, 1, 1, 1, 5};  // two layers of four experts
  EXPECT_DOUBLE_EQ(expert_imbalance(even, 4), (1.0 + 5.0 * 4 / 8) / 2);
  const int64_t idle[] = {0, 0, 0, 0};
  EXPECT_EQ(expert_imbalance(idle, 4), 0.0);
  EXPECT_EQ(expert_imbalance({}, 4), 0.0);
}

}  // namespace
}  // namespace tokenmill::engine
