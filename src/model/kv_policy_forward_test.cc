// The streaming KV policy through the real forward pass (SingleSequence,
// which evicts between steps exactly as the scheduler does), on tiny
// synthetic models of every architecture:
// - a window longer than the sequence gives the very logits of the full
//   cache;
// - with no sinks, every kept key moves by the same amount, so attention
//   (which RoPE makes depend on distances only) must give the same logits
//   whether keys keep their true positions (preserve) or are re-rotated to
//   their cache slots (rerotate): this checks Model::shift_keys and the
//   chunks' RoPE offsets against each other, for the global and the local
//   (sliding-window) RoPE bases;
// - the re-rotated quantized caches stay close to the exact one;
// - the heavy-hitter policy keeps everything within its budget, equals
//   streaming when its budget leaves no room for heavy hitters, and the
//   forward pass gives each query head's keys one unit of mass per
//   full-attention layer;
// - the cache holds only the policy's blocks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "kv/kv_policy.h"
#include "model/model.h"
#include "model/single_sequence.h"
#include "model/synth.h"
#include "model/test_gguf_variants.h"
#include "util/error.h"

namespace tokenmill::model {
namespace {

using test_files::random_tokens;

constexpr int64_t kStep = 4;

// Every position's logits, the tokens fed kStep at a time.
std::vector<float> run(Model& m, const std::vector<int32_t>& tokens, kv::KvDtype dtype, const kv::KvPolicy& policy,
                       ThreadPool& pool, int64_t* evicted = nullptr) {
  SingleSequence seq(m, static_cast<int64_t>(tokens.size()), dtype, policy, kStep, &pool);
  std::vector<float> all, logits;
  for (size_t pos = 0; pos < tokens.size(); pos += kStep) {
    const size_t n = std::min<size_t>(kStep, tokens.size() - pos);
    seq.forward({tokens.data() + pos, n}, LogitRows::kAll, logits, pool);
    all.insert(all.end(), logits.begin(), logits.end());
  }
  if (evicted != nullptr) *evicted = seq.evicted();
  return all;
}

double max_rel_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double worst = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i)
    worst = std::max(worst, std::fabs(double(a[i]) - double(b[i])) / std::max(1.0, std::fabs(double(b[i]))));
  return worst;
}

class KvPolicyForward : public ::testing::TestWithParam<SynthArch> {
 protected:
  KvPolicyForward() : tiny_(GetParam(), 11, "tm_kv_policy_forward") {}
  Model& model() { return tiny_.model(); }
  std::vector<int32_t> tokens(int64_t n) {
    return random_tokens(std::min(n, model().config().n_ctx_train), model().config().n_vocab, 5);
  }
  test_files::TinyModelFile tiny_;
  ThreadPool pool_{2};
};

TEST_P(KvPolicyForward, AWindowLongerThanTheSequenceGivesTheFullCachesLogits) {
  const std::vector<int32_t> t = tokens(70);
  const std::vector<float> full = run(model(), t, kv::KvDtype::F32, {}, pool_);
  for (kv::KvPositions positions : {kv::KvPositions::kPreserve, kv::KvPositions::kRerotate}) {
    int64_t evicted = -1;
    EXPECT_EQ(run(model(), t, kv::KvDtype::F32, kv::streaming_policy(4, 70, positions), pool_, &evicted), full);
    EXPECT_EQ(evicted, 0);
  }
}

TEST_P(KvPolicyForward, WithoutSinksRerotatedKeysGiveThePreservedLogits) {
  const std::vector<int32_t> t = tokens(96);
  int64_t evicted = 0;
  const std::vector<float> preserve =
      run(model(), t, kv::KvDtype::F32, kv::streaming_policy(0, 20, kv::KvPositions::kPreserve), pool_, &evicted);
  EXPECT_GE(evicted, 48);  // several evictions, so several rotations of the same keys
  const std::vector<float> rerotate =
      run(model(), t, kv::KvDtype::F32, kv::streaming_policy(0, 20, kv::KvPositions::kRerotate), pool_);
  EXPECT_LT(max_rel_diff(rerotate, preserve), 2e-4);
  // The policy matters (where a layer attends past the window): the full
  // cache's logits differ after the first eviction.
  const std::vector<bool>& local = model().config().layer_is_local;
  if (std::all_of(local.begin(), local.end(), [](bool l) { return l; })) return;
  EXPECT_GT(max_rel_diff(run(model(), t, kv::KvDtype::F32, {}, pool_), preserve), 1e-3);
}

TEST_P(KvPolicyForward, RerotatedQuantizedCachesStayClose) {
  const std::vector<int32_t> t = tokens(96);
  const kv::KvPolicy preserve = kv::streaming_policy(0, 20, kv::KvPositions::kPreserve);
  const kv::KvPolicy rerotate = kv::streaming_policy(0, 20, kv::KvPositions::kRerotate);
  for (kv::KvDtype dtype : {kv::KvDtype::F16, kv::KvDtype::Q8_0}) {
    const double d = max_rel_diff(run(model(), t, dtype, rerotate, pool_), run(model(), t, dtype, preserve, pool_));
    EXPECT_LT(d, dtype == kv::KvDtype::F16 ? 2e-2 : 1e-1) << kv::kv_dtype_name(dtype);
  }
}

// Heavy hitters: a budget above the sequence keeps everything; with no
// sinks and a budget of just the window, every candidate block goes at
// each step, which is the streaming policy, so the logits must be
// streaming's (the mass accumulates without touching the output); a
// larger budget keeps more than streaming and evicts by mass.
TEST_P(KvPolicyForward, HeavyHitterPolicyAgainstFullAndStreaming) {
  const std::vector<int32_t> t = tokens(96);
  const std::vector<float> full = run(model(), t, kv::KvDtype::F32, {}, pool_);
  int64_t evicted = -1;
  EXPECT_EQ(run(model(), t, kv::KvDtype::F32, kv::heavy_hitter_policy(4, 16, 96), pool_, &evicted), full);
  EXPECT_EQ(evicted, 0);
  for (kv::KvPositions positions : {kv::KvPositions::kPreserve, kv::KvPositions::kRerotate}) {
    int64_t h2o_evicted = 0;
    const std::vector<float> h2o =
        run(model(), t, kv::KvDtype::F32, kv::heavy_hitter_policy(0, 20, 20, positions), pool_, &h2o_evicted);
    int64_t streaming_evicted = 0;
    EXPECT_EQ(h2o,
              run(model(), t, kv::KvDtype::F32, kv::streaming_policy(0, 20, positions), pool_, &streaming_evicted));
    EXPECT_EQ(h2o_evicted, streaming_evicted);
    EXPECT_GE(h2o_evicted, 48);
  }
  int64_t budget_evicted = 0;
  const std::vector<float> budget =
      run(model(), t, kv::KvDtype::F32, kv::heavy_hitter_policy(4, 16, 48), pool_, &budget_evicted);
  EXPECT_GE(budget_evicted, 32);
  EXPECT_LE(budget_evicted, 96 - 48);
  EXPECT_EQ(budget.size(), full.size());
}

// Every full-attention layer's query heads each give a query's keys a
// total weight of 1; sliding-window layers add nothing.
TEST_P(KvPolicyForward, ForwardAddsOneUnitOfMassPerQueryHeadOfEveryFullAttentionLayer) {
  const std::vector<int32_t> t = tokens(40);
  const ModelConfig& c = model().config();
  const int64_t full_layers = std::count(c.layer_is_local.begin(), c.layer_is_local.end(), false);
  kv::PagedKvStorage storage(model().kv_geometry(16, kv::KvDtype::F32), 4);
  const std::vector<int32_t> blocks{2, 0, 3};
  const ChunkTable table{blocks, 0};
  std::vector<float> mass(40, 0.0f), logits;
  SequenceChunk chunk{t, 0, {&table, 1}, LogitRows::kLast};
  chunk.key_mass = mass.data();
  model().forward({&chunk, 1}, storage, logits, pool_);
  double total = 0;
  for (float m : mass) total += m;
  EXPECT_NEAR(total, 40.0 * c.n_head * full_layers, 1e-3 * 40 * c.n_head * std::max<int64_t>(full_layers, 1));
  if (full_layers > 0) {
    EXPECT_GT(mass[0], mass[39]);  // the first key is seen by every query, the last by one
    for (float m : mass) EXPECT_GT(m, 0.0f);
  }
}

// Re-rotation runs past the training context: the tiny llama (context
// 256) reads 600 tokens in steps of 4, its positions never past the
// policy's bound, its logits finite, its cache small; a policy spanning
// more positions than the context, and preserve past it, are refused.
TEST(KvPolicyForwardPool, RerotationRunsPastTheTrainingContext) {
  test_files::TinyModelFile tiny(SynthArch::kLlama, 3, "tm_kv_policy_past_ctx");
  Model& m = tiny.model();
  const int64_t ctx = m.config().n_ctx_train;
  ThreadPool pool(1);
  const std::vector<int32_t> t = random_tokens(600, m.config().n_vocab, 9);
  for (const kv::KvPolicy& p : {kv::streaming_policy(4, 64, kv::KvPositions::kRerotate),
                                kv::heavy_hitter_policy(4, 64, 128, kv::KvPositions::kRerotate)}) {
    SingleSequence seq(m, 600, kv::KvDtype::F16, p, kStep, &pool);
    std::vector<float> logits;
    for (size_t pos = 0; pos < t.size(); pos += kStep)
      seq.forward({t.data() + pos, kStep}, LogitRows::kLast, logits, pool);
    EXPECT_EQ(seq.size(), 600);
    EXPECT_GT(600 - seq.evicted(), 64);
    EXPECT_LE(600 - seq.evicted(), p.max_blocks(SingleSequence::kBlockSize, kStep) * SingleSequence::kBlockSize);
    for (float x : logits) ASSERT_TRUE(std::isfinite(x));
  }
  EXPECT_THROW(
      SingleSequence(m, 600, kv::KvDtype::F16, kv::streaming_policy(4, 64, kv::KvPositions::kPreserve), kStep, &pool),
      Error);
  EXPECT_THROW(
      SingleSequence(m, 600, kv::KvDtype::F16, kv::streaming_policy(4, ctx, kv::KvPositions::kRerotate), kStep, &pool),
      Error);
}

TEST(KvPolicyForwardPool, ThePoolHoldsOnlyThePolicysBlocks) {
  test_files::TinyModelFile tiny(SynthArch::kLlama, 3, "tm_kv_policy_pool");
  ThreadPool pool(1);
  const kv::KvPolicy p = kv::streaming_policy(4, 20, kv::KvPositions::kPreserve);
  SingleSequence seq(tiny.model(), tiny.model().config().n_ctx_train, kv::KvDtype::F16, p, kStep, &pool);
  EXPECT_EQ(seq.capacity(), tiny.model().config().n_ctx_train);
  std::vector<float> logits;
  const std::vector<int32_t> big(kStep + 1, 1);
  EXPECT_THROW(seq.forward(big, LogitRows::kLast, logits, pool), Error);  // a step above max_step
  EXPECT_THROW(SingleSequence(tiny.model(), 64, kv::KvDtype::F16, p, 0, &pool), Error);
  EXPECT_THROW(
      SingleSequence(tiny.model(), 64, kv::KvDtype::F16, kv::streaming_policy(0, 8, kv::KvPositions::kRerotate), 4),
      Error);  // re-rotation needs a thread pool
}

INSTANTIATE_TEST_SUITE_P(Archs, KvPolicyForward,
                         ::testing::Values(SynthArch::kLlama, SynthArch::kQwen2, SynthArch::kGemma3, SynthArch::kPhi3,
                                           SynthArch::kGemma2, SynthArch::kOlmo2),
                         [](const ::testing::TestParamInfo<SynthArch>& info) {
                           return std::string(synth_arch_name(info.param));
                         });

}  // namespace
}  // namespace tokenmill::model
