// Model::forward's final hidden states (SequenceChunk::hidden, what
// embedding requests pool): they are exactly the vectors the output
// projection turns into logits, they come only for the chunks that ask, in
// chunk order, and chunking does not change them.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "kernels/matmul.h"
#include "kv/paged_kv_storage.h"
#include "model/model.h"
#include "model/synth.h"
#include "model/test_gguf_variants.h"

namespace tokenmill::model {
namespace {

constexpr int64_t kHiddenTestBlock = 4;

// A tiny synthetic model written to a temporary file and loaded.
class HiddenStatesModel : public test_files::TinyModelFile {
 public:
  explicit HiddenStatesModel(SynthArch arch) : TinyModelFile(arch, 11, "tm_hidden_states") {}
};

class HiddenStates : public ::testing::TestWithParam<SynthArch> {};

TEST_P(HiddenStates, AreWhatTheOutputProjectionReads) {
  HiddenStatesModel tiny(GetParam());
  Model& m = tiny.model();
  ThreadPool pool(2);
  const int64_t vocab = m.config().n_vocab, embd = m.config().n_embd;
  const std::vector<int32_t> a = test_files::random_tokens(9, vocab, 1), b = test_files::random_tokens(5, vocab, 2),
                             c = test_files::random_tokens(4, vocab, 3);
  kv::PagedKvStorage kv(m.kv_geometry(kHiddenTestBlock, kv::KvDtype::F32), 12);
  const std::vector<int32_t> ta = {0, 1, 2}, tb = {3, 4}, tc = {5};
  const ChunkTable table_a[] = {{ta, 0}}, table_b[] = {{tb, 0}}, table_c[] = {{tc, 0}};
  std::vector<SequenceChunk> chunks = {
      {a, 0, table_a, LogitRows::kAll}, {b, 0, table_b, LogitRows::kLast}, {c, 0, table_c, LogitRows::kNone}};
  chunks[0].hidden = true;
  chunks[2].hidden = true;
  std::vector<float> logits, hidden;
  kv::PagedKvStorage* const pools[] = {&kv};
  m.forward(chunks, pools, logits, pool, {}, &hidden);
  ASSERT_EQ(hidden.size(), static_cast<size_t>((9 + 4) * embd));  // a's rows, then c's; none of b
  ASSERT_EQ(logits.size(), static_cast<size_t>((9 + 1) * vocab));

  // logits[j][v] = output[v] . hidden[j] / logit_scale for a's rows (the
  // first 9 of each); granite's logit_scale divides the logits only.
  std::vector<float> w(static_cast<size_t>(embd));
  for (int64_t v = 0; v < vocab; ++v) {
    kernels::dequantize_weight_row(m.weights().output, v, w.data());
    for (int64_t j = 0; j < 9; ++j) {
      double dot = 0;
      for (int64_t d = 0; d < embd; ++d)
        dot += static_cast<double>(w[static_cast<size_t>(d)]) * hidden[static_cast<size_t>(j * embd + d)];
      dot /= m.config().logit_scale;
      const float got = logits[static_cast<size_t>(j * vocab + v)];
      ASSERT_NEAR(got, dot, 1e-4 * std::max(1.0, std::fabs(dot))) << "row " << j << " token " << v;
    }
  }
  // The final norm's output has the norm weight's scale: rms ~ 1 per row.
  for (int64_t j = 0; j < 13; ++j) {
    double ss = 0;
    for (int64_t d = 0; d < embd; ++d) ss += std::pow(hidden[static_cast<size_t>(j * embd + d)], 2);
    EXPECT_GT(std::sqrt(ss / static_cast<double>(embd)), 0.1) << "row " << j;
  }
}

TEST_P(HiddenStates, ChunkingDoesNotChangeThem) {
  HiddenStatesModel tiny(GetParam());
  Model& m = tiny.model();
  ThreadPool pool(2);
  const std::vector<int32_t> tokens = test_files::random_tokens(30, m.config().n_vocab, 4);
  kv::PagedKvStorage kv(m.kv_geometry(kHiddenTestBlock, kv::KvDtype::F32), 8);
  std::vector<int32_t> blocks(8);
  std::iota(blocks.begin(), blocks.end(), 0);
  const ChunkTable table[] = {{blocks, 0}};
  kv::PagedKvStorage* const pools[] = {&kv};
  auto run = [&](size_t chunk) {
    std::vector<float> all, logits, hidden;
    for (size_t pos = 0; pos < tokens.size(); pos += chunk) {
      const size_t n = std::min(chunk, tokens.size() - pos);
      SequenceChunk c{{tokens.data() + pos, n}, static_cast<int64_t>(pos), table, LogitRows::kNone};
      c.hidden = true;
      m.forward({&c, 1}, pools, logits, pool, {}, &hidden);
      EXPECT_TRUE(logits.empty());
      all.insert(all.end(), hidden.begin(), hidden.end());
    }
    return all;
  };
  const std::vector<float> whole = run(30);
  const std::vector<float> sevens = run(7);
  ASSERT_EQ(whole.size(), sevens.size());
  for (size_t i = 0; i < whole.size(); ++i) ASSERT_NEAR(whole[i], sevens[i], 1e-5) << "at " << i;
  // Without an output vector nothing is written (and nothing fails).
  SequenceChunk c{{tokens.data(), 3}, 0, table, LogitRows::kLast};
  c.hidden = true;
  std::vector<float> logits;
  m.forward({&c, 1}, pools, logits, pool);
  EXPECT_EQ(logits.size(), static_cast<size_t>(m.config().n_vocab));
}

INSTANTIATE_TEST_SUITE_P(Archs, HiddenStates,
                         ::testing::Values(SynthArch::kLlama, SynthArch::kQwen2, SynthArch::kGemma3, SynthArch::kQwen3,
                                           SynthArch::kOlmo2, SynthArch::kGranite),
                         [](const auto& info) { return std::string(synth_arch_name(info.param)); });

}  // namespace
}  // namespace tokenmill::model
