// The q4_0_kc KV cache through the real forward pass: the scales are
// measured once, the logits stay close to the exact cache on every
// architecture (they would not if the queries missed the scales the keys
// were divided by), and on the real Gemma 3, whose keys have outlier
// channels, they are closer than plain q4_0's.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "kv/kv_policy.h"
#include "model/model.h"
#include "model/single_sequence.h"
#include "model/synth.h"
#include "model/test_gguf_variants.h"
#include "tokenizer/tokenizer.h"
#include "util/test_dependency.h"

namespace tokenmill::model {
namespace {

// Every position's logits, fed `step` tokens at a time.
std::vector<float> all_logits(Model& m, const std::vector<int32_t>& tokens, kv::KvDtype dtype,
                              const kv::KvPolicy& policy, ThreadPool& pool, int64_t step = 8) {
  SingleSequence seq(m, static_cast<int64_t>(tokens.size()), dtype, policy, step, &pool);
  std::vector<float> all, logits;
  for (size_t pos = 0; pos < tokens.size(); pos += static_cast<size_t>(step)) {
    const size_t n = std::min<size_t>(static_cast<size_t>(step), tokens.size() - pos);
    seq.forward({tokens.data() + pos, n}, LogitRows::kAll, logits, pool);
    all.insert(all.end(), logits.begin(), logits.end());
  }
  return all;
}

// Mean absolute difference over every logit.
double mean_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double sum = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) sum += std::fabs(double(a[i]) - double(b[i]));
  return a.empty() ? 0 : sum / static_cast<double>(a.size());
}

double mean_abs(const std::vector<float>& a) {
  double sum = 0;
  for (float x : a) sum += std::fabs(double(x));
  return a.empty() ? 0 : sum / static_cast<double>(a.size());
}

// Mean KL divergence KL(base || other) over the rows of n_vocab logits.
double mean_kld(const std::vector<float>& base, const std::vector<float>& other, int64_t n_vocab) {
  const auto log_softmax = [&](const float* row, std::vector<double>& out) {
    const double top = *std::max_element(row, row + n_vocab);
    double sum = 0;
    for (int64_t i = 0; i < n_vocab; ++i) sum += std::exp(double(row[i]) - top);
    for (int64_t i = 0; i < n_vocab; ++i) out[static_cast<size_t>(i)] = double(row[i]) - top - std::log(sum);
  };
  std::vector<double> p(static_cast<size_t>(n_vocab)), q(p.size());
  const int64_t rows = static_cast<int64_t>(base.size()) / n_vocab;
  double total = 0;
  for (int64_t r = 0; r < rows; ++r) {
    log_softmax(base.data() + r * n_vocab, p);
    log_softmax(other.data() + r * n_vocab, q);
    for (size_t i = 0; i < p.size(); ++i) total += std::exp(p[i]) * (p[i] - q[i]);
  }
  return rows == 0 ? 0 : total / static_cast<double>(rows);
}

class KeyScaledForward : public ::testing::TestWithParam<SynthArch> {};

TEST_P(KeyScaledForward, LogitsStayCloseToTheExactCache) {
  test_files::TinyModelFile tiny(GetParam(), 17, "tm_key_scaled_forward");
  Model& m = tiny.model();
  ThreadPool pool(2);
  const std::vector<int32_t> t =
      test_files::random_tokens(std::min<int64_t>(64, m.config().n_ctx_train), m.config().n_vocab, 9);
  EXPECT_TRUE(m.key_scales().empty());
  const std::vector<float> exact = all_logits(m, t, kv::KvDtype::F32, {}, pool);
  const std::vector<float> scaled = all_logits(m, t, kv::KvDtype::Q4_0_KC, {}, pool);
  const std::vector<float> plain = all_logits(m, t, kv::KvDtype::Q4_0, {}, pool);
  // Measured once, for every layer and key channel, all positive.
  const std::vector<float> scales = m.key_scales();
  ASSERT_EQ(static_cast<int64_t>(scales.size()), m.config().n_layer * m.config().n_kv_dim());
  for (float s : scales) EXPECT_TRUE(std::isfinite(s) && s > 0) << s;
  EXPECT_EQ(all_logits(m, t, kv::KvDtype::Q4_0_KC, {}, pool), scaled);  // the same scales again
  EXPECT_EQ(m.key_scales(), scales);
  // Within plain q4_0's error, give or take (random synthetic keys have no
  // outlier channels to gain from; queries without the scales would miss
  // by far more).
  const double scale = mean_abs(exact);
  const double err_scaled = mean_abs_diff(scaled, exact);
  const double err_plain = mean_abs_diff(plain, exact);
  EXPECT_LT(err_scaled, 1.5 * err_plain) << "plain q4_0: " << err_plain;
  EXPECT_LT(err_scaled, 0.3 * scale);
  // Re-rotated keys (KV policy rerotate, no sinks) give the preserved ones'
  // logits: the rotation commutes with the key scaling.
  const kv::KvPolicy preserve = kv::streaming_policy(0, 24, kv::KvPositions::kPreserve);
  const kv::KvPolicy rerotate = kv::streaming_policy(0, 24, kv::KvPositions::kRerotate);
  EXPECT_LT(mean_abs_diff(all_logits(m, t, kv::KvDtype::Q4_0_KC, rerotate, pool, 4),
                          all_logits(m, t, kv::KvDtype::Q4_0_KC, preserve, pool, 4)),
            0.1 * scale);
}

INSTANTIATE_TEST_SUITE_P(Archs, KeyScaledForward,
                         ::testing::Values(SynthArch::kLlama, SynthArch::kQwen2, SynthArch::kGemma3, SynthArch::kPhi3),
                         [](const ::testing::TestParamInfo<SynthArch>& info) {
                           return std::string(synth_arch_name(info.param));
                         });

// Gemma 3 270M: a few key channels dominate, which is what the scales are
// for. Over a short English text the scaled cache's logits are measurably
// closer to the exact cache's than plain q4_0's.
TEST(KeyScaledForwardGemma, CloserThanPlainQ4_0) {
  // Five minutes under AArch64 emulation, one under ASan: the quick stages
  // (TOKENMILL_TEST_QUICK=1) leave it to the native unit and unit-scalar
  // stages; the code it runs is in the synthetic tests above everywhere.
  if (const char* quick = std::getenv("TOKENMILL_TEST_QUICK"); quick != nullptr && std::string(quick) == "1")
    GTEST_SKIP() << "a real-model comparison, left out of the quick (sanitizer, emulated) stages";
  const std::string path = testing::default_model_path();
  if (path.empty()) TM_MISSING_DEPENDENCY("the default model (scripts/default_model.sh)");
  std::unique_ptr<Model> m = Model::load(path);
  const tokenizer::Tokenizer tok = tokenizer::Tokenizer::from_gguf(m->file());
  const std::vector<int32_t> t = tok.encode(
      "Every spring the river rises over the low fields, and the farmers move their sheep to the hills until the "
      "water goes down. Most years it reaches the old mill; once, in a wet April, it came as far as the church "
      "steps, and people still talk about the boat that was rowed down the high street.",
      true, false);
  ThreadPool pool(2);
  const std::vector<float> exact = all_logits(*m, t, kv::KvDtype::F32, {}, pool, 16);
  const int64_t V = m->config().n_vocab;
  const double kld_scaled = mean_kld(exact, all_logits(*m, t, kv::KvDtype::Q4_0_KC, {}, pool, 16), V);
  const double kld_plain = mean_kld(exact, all_logits(*m, t, kv::KvDtype::Q4_0, {}, pool, 16), V);
  EXPECT_LT(kld_scaled, 0.8 * kld_plain) << "mean KLD: q4_0_kc " << kld_scaled << ", q4_0 " << kld_plain;
}

}  // namespace
}  // namespace tokenmill::model
