// Model::forward over the paged KV cache, on tiny synthetic llama, qwen2,
// gemma3, phi3 (fused q/k/v and gate/up), gemma2, qwen3, olmo2 and granite
// models (gemma3 and gemma2 with an 8-position sliding window, so the
// 30-token prompts cross it): chunking and batching must not change the
// logits, nor where the blocks sit in the pool; F16 storage stays close to F32; and bad
// steps are rejected with Error.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "kv/paged_kv_storage.h"
#include "model/model.h"
#include "model/single_sequence.h"
#include "model/synth.h"
#include "model/test_gguf_variants.h"
#include "util/error.h"

namespace tokenmill::model {
namespace {

constexpr int64_t kBlock = 4;  // small, so 30 positions span 8 blocks and chunks start mid-block

// A tiny synthetic model written to a temporary file and loaded.
class Tiny : public test_files::TinyModelFile {
 public:
  explicit Tiny(SynthArch arch) : TinyModelFile(arch, 7, "tm_paged_forward") {}
};

using test_files::random_tokens;

// Runs `tokens` as one sequence in chunks of `chunk` tokens through `table`
// and returns every position's logits [n, n_vocab].
std::vector<float> run_chunked(Model& m, kv::PagedKvStorage& kv, const std::vector<int32_t>& table,
                               const std::vector<int32_t>& tokens, size_t chunk, ThreadPool& pool) {
  std::vector<float> all, logits;
  for (size_t pos = 0; pos < tokens.size(); pos += chunk) {
    const size_t n = std::min(chunk, tokens.size() - pos);
    const ChunkTable tables[] = {{table, 0}};
    const SequenceChunk c{{tokens.data() + pos, n}, static_cast<int64_t>(pos), tables, LogitRows::kAll};
    m.forward({&c, 1}, kv, logits, pool);
    all.insert(all.end(), logits.begin(), logits.end());
  }
  return all;
}

// Logits are O(1) here; 1e-5 absolute (relative above 1) leaves room for
// the float matmul kernels' tiling differences between batch sizes.
void expect_near(const std::vector<float>& a, const std::vector<float>& b, double tol, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_NEAR(a[i], b[i], tol * std::max(1.0, std::fabs(double(b[i])))) << what << " at " << i;
  }
}

std::vector<int32_t> identity(int64_t n) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), 0);
  return t;
}

std::vector<int32_t> shuffled(int64_t num_blocks, int64_t n, uint32_t seed) {
  std::vector<int32_t> t = identity(num_blocks);
  std::shuffle(t.begin(), t.end(), std::mt19937(seed));
  t.resize(static_cast<size_t>(n));
  return t;
}

class PagedForward : public ::testing::TestWithParam<SynthArch> {};

// (a) one chunk, chunks of 7 and token by token give the same logits; and
// (c) a shuffled block table in a larger pool gives identical results.
TEST_P(PagedForward, ChunkingAndBlockPlacementDoNotChangeLogits) {
  Tiny tiny(GetParam());
  Model& m = tiny.model();
  ThreadPool pool(2);
  const std::vector<int32_t> tokens = random_tokens(30, m.config().n_vocab, 1);
  kv::PagedKvStorage kv(m.kv_geometry(kBlock, kv::KvDtype::F32), 20);
  const std::vector<int32_t> table = identity(8);
  const std::vector<float> whole = run_chunked(m, kv, table, tokens, 30, pool);
  ASSERT_EQ(whole.size(), static_cast<size_t>(30 * m.config().n_vocab));
  expect_near(run_chunked(m, kv, table, tokens, 7, pool), whole, 1e-5, "chunks of 7");
  expect_near(run_chunked(m, kv, table, tokens, 1, pool), whole, 1e-5, "token by token");

  for (size_t chunk : {30, 7}) {
    const std::vector<float> a = run_chunked(m, kv, table, tokens, chunk, pool);
    const std::vector<float> b = run_chunked(m, kv, shuffled(20, 8, 3), tokens, chunk, pool);
    EXPECT_EQ(a, b) << "shuffled block table, chunk " << chunk;
  }
}

// (b) a prefill chunk of one sequence and a decode token of another in one
// step give each the logits it gets alone.
TEST_P(PagedForward, MixedBatchEqualsEachSequenceAlone) {
  Tiny tiny(GetParam());
  Model& m = tiny.model();
  ThreadPool pool(2);
  const int64_t vocab = m.config().n_vocab;
  const std::vector<int32_t> a = random_tokens(30, vocab, 2);  // prefilled 0..10, then 10..30 in the mixed step
  const std::vector<int32_t> b = random_tokens(13, vocab, 3);  // prefilled 0..12, then decodes position 12
  kv::PagedKvStorage kv(m.kv_geometry(kBlock, kv::KvDtype::F32), 16);
  const std::vector<int32_t> table_a = {9, 2, 14, 5, 0, 11, 7, 3};
  const std::vector<int32_t> table_b = {6, 13, 1, 10};
  std::vector<float> logits;
  auto step = [&](std::vector<SequenceChunk> chunks) {
    m.forward(chunks, kv, logits, pool);
    return logits;
  };
  const ChunkTable ta_table[] = {{table_a, 0}}, tb_table[] = {{table_b, 0}};
  const std::span<const ChunkTable> ta = ta_table, tb = tb_table;
  const std::vector<float> none =
      step({{{a.data(), 10}, 0, ta, LogitRows::kNone}, {{b.data(), 12}, 0, tb, LogitRows::kNone}});
  EXPECT_TRUE(none.empty());  // prefills that sample nothing skip the output projection

  const std::vector<float> mixed =
      step({{{a.data() + 10, 20}, 10, ta, LogitRows::kAll}, {{b.data() + 12, 1}, 12, tb, LogitRows::kLast}});
  ASSERT_EQ(mixed.size(), static_cast<size_t>(21 * vocab));
  const std::vector<float> alone_a = step({{{a.data() + 10, 20}, 10, ta, LogitRows::kAll}});
  const std::vector<float> alone_b = step({{{b.data() + 12, 1}, 12, tb, LogitRows::kLast}});
  expect_near({mixed.begin(), mixed.begin() + 20 * vocab}, alone_a, 1e-5, "prefill chunk");
  expect_near({mixed.begin() + 20 * vocab, mixed.end()}, alone_b, 1e-5, "decode token");

  // The same, each sequence run from scratch alone with its own pool.
  SingleSequence sa(m, 30, kv::KvDtype::F32), sb(m, 13, kv::KvDtype::F32);
  std::vector<float> la, lb;
  sa.forward({a.data(), 10}, false, la, pool);
  sa.forward({a.data() + 10, 20}, true, la, pool);
  sb.forward(b, false, lb, pool);
  expect_near(la, alone_a, 1e-5, "single sequence a");
  expect_near(lb, alone_b, 1e-5, "single sequence b");
  EXPECT_EQ(sa.size(), 30);
  EXPECT_THROW(sa.forward({a.data(), 1}, false, la, pool), Error);  // full
  EXPECT_EQ(sa.size(), 30);
}

// (d) F16 storage rounds each K/V element with a relative error of at most
// 2^-11 (4.9e-4). Attention outputs are convex combinations of V rows with
// weights whose log changes by at most ~2^-11 |score|, so each layer's
// output moves by about 2^-11 of its scale; through this 2-layer model with
// unit-gain weights it reaches the logits roughly linearly (measured: 3.5e-4
// to 6.6e-4 of the largest logit for the three archs). 10 x 2^-11 of the
// largest logit is allowed; a bug in F16 reading (wrong row, wrong lane, no
// conversion) moves logits by O(1). The difference must also be non-zero:
// F16 storage is really in use.
TEST_P(PagedForward, F16StorageStaysCloseToF32) {
  Tiny tiny(GetParam());
  Model& m = tiny.model();
  ThreadPool pool(2);
  const std::vector<int32_t> tokens = random_tokens(30, m.config().n_vocab, 4);
  kv::PagedKvStorage kv32(m.kv_geometry(kBlock, kv::KvDtype::F32), 8);
  kv::PagedKvStorage kv16(m.kv_geometry(kBlock, kv::KvDtype::F16), 8);
  const std::vector<float> f32 = run_chunked(m, kv32, identity(8), tokens, 7, pool);
  const std::vector<float> f16 = run_chunked(m, kv16, identity(8), tokens, 7, pool);
  double max_logit = 0, max_diff = 0;
  for (size_t i = 0; i < f32.size(); ++i) {
    max_logit = std::max(max_logit, std::fabs(double(f32[i])));
    max_diff = std::max(max_diff, std::fabs(double(f32[i]) - f16[i]));
  }
  EXPECT_GT(max_diff, 0.0);
  EXPECT_LT(max_diff, 10 * std::ldexp(1.0, -11) * max_logit)
      << "max |diff| " << max_diff << ", max |logit| " << max_logit;
  std::cout << synth_arch_name(GetParam()) << ": F16 vs F32 KV max |logit diff| " << max_diff << " (max |logit| "
            << max_logit << ")\n";
}

// Layer skipping (self-speculative drafts): an all-zero mask is the plain
// pass; skipping a layer changes the logits, leaves that layer's K/V at the
// chunk's positions as they were and still writes the other layers'; a mask
// of the wrong length is refused.
TEST_P(PagedForward, SkippedLayersAreLeftOutAndWriteNoKv) {
  Tiny tiny(GetParam());
  Model& m = tiny.model();
  const ModelConfig& c = m.config();
  ASSERT_GE(c.n_layer, 2);
  ThreadPool pool(2);
  const std::vector<int32_t> tokens = random_tokens(12, c.n_vocab, 5);
  kv::PagedKvStorage kv(m.kv_geometry(kBlock, kv::KvDtype::F32), 4);
  const std::vector<int32_t> table = identity(4);
  const ChunkTable tables[] = {{table, 0}};
  std::vector<float> logits;
  const SequenceChunk prefix{{tokens.data(), 11}, 0, tables, LogitRows::kNone};
  m.forward({&prefix, 1}, kv, logits, pool);
  const SequenceChunk last{{tokens.data() + 11, 1}, 11, tables, LogitRows::kLast};
  kv::PagedKvStorage* const pools[] = {&kv};

  m.forward({&last, 1}, pools, logits, pool);
  const std::vector<float> full = logits;
  const std::vector<uint8_t> none(static_cast<size_t>(c.n_layer), 0);
  m.forward({&last, 1}, pools, logits, pool, none);
  EXPECT_EQ(logits, full);

  // Position 11's K row of each layer, before and after a pass that skips layer 1.
  const int64_t row_bytes = c.n_kv_dim() * static_cast<int64_t>(sizeof(float));
  auto key_row = [&](int64_t layer) {
    const uint8_t* p = kv.keys(layer) + 11 * row_bytes;  // block 2, slot 3 of the identity table
    return std::vector<uint8_t>(p, p + row_bytes);
  };
  std::vector<std::vector<uint8_t>> before;
  for (int64_t l = 0; l < c.n_layer; ++l) before.push_back(key_row(l));
  std::fill_n(kv.keys(1) + 11 * row_bytes, row_bytes, uint8_t{0x7f});  // a mark the skip must leave
  std::fill_n(kv.keys(0) + 11 * row_bytes, row_bytes, uint8_t{0x7f});  // one layer 0 must overwrite
  std::vector<uint8_t> skip(static_cast<size_t>(c.n_layer), 0);
  skip[1] = 1;
  m.forward({&last, 1}, pools, logits, pool, skip);
  EXPECT_NE(logits, full);
  EXPECT_EQ(key_row(0), before[0]);
  EXPECT_EQ(key_row(1), std::vector<uint8_t>(static_cast<size_t>(row_bytes), 0x7f));

  const std::vector<uint8_t> short_mask(static_cast<size_t>(c.n_layer - 1), 0);
  EXPECT_THROW(m.forward({&last, 1}, pools, logits, pool, short_mask), Error);
}

TEST_P(PagedForward, BadStepsThrow) {
  Tiny tiny(GetParam());
  Model& m = tiny.model();
  const ModelConfig& c = m.config();
  ThreadPool pool(1);
  kv::PagedKvStorage kv(m.kv_geometry(kBlock, kv::KvDtype::F16), 4);
  std::vector<float> logits;
  const std::vector<int32_t> tokens = {1, 2, 3, 4, 5}, table = {0, 1}, bad_id = {0, 4};
  const std::vector<int32_t> outside = {1, static_cast<int32_t>(c.n_vocab)}, negative = {-1};
  auto run = [&](std::span<const int32_t> t, int64_t start, std::span<const int32_t> tb, kv::PagedKvStorage& pool_kv) {
    const ChunkTable tables[] = {{tb, 0}};
    const SequenceChunk chunk{t, start, tables, LogitRows::kLast};
    m.forward({&chunk, 1}, pool_kv, logits, pool);
  };
  EXPECT_NO_THROW(run(tokens, 0, table, kv));
  EXPECT_THROW(run({}, 0, table, kv), Error);        // empty chunk
  EXPECT_THROW(run(outside, 0, table, kv), Error);   // token == n_vocab
  EXPECT_THROW(run(negative, 0, table, kv), Error);  // token < 0
  EXPECT_THROW(run(tokens, 4, table, kv), Error);    // positions 4..8 need 3 blocks
  EXPECT_THROW(run(tokens, -1, table, kv), Error);   // negative start
  EXPECT_THROW(run(tokens, 0, bad_id, kv), Error);   // block 4 of a 4-block pool
  kv::KvGeometry g = m.kv_geometry(kBlock, kv::KvDtype::F16);
  g.n_layer += 1;
  kv::PagedKvStorage wrong_layers(g, 4);
  EXPECT_THROW(run(tokens, 0, table, wrong_layers), Error);
  g = m.kv_geometry(kBlock, kv::KvDtype::F16);
  g.n_kv_dim *= 2;
  kv::PagedKvStorage wrong_dim(g, 4);
  EXPECT_THROW(run(tokens, 0, table, wrong_dim), Error);
  EXPECT_THROW(SingleSequence(m, 0, kv::KvDtype::F16), Error);
  EXPECT_THROW(SingleSequence(m, c.n_ctx_train + 1, kv::KvDtype::F16), Error);
}

INSTANTIATE_TEST_SUITE_P(Archs, PagedForward,
                         ::testing::Values(SynthArch::kLlama, SynthArch::kQwen2, SynthArch::kGemma3, SynthArch::kPhi3,
                                           SynthArch::kGemma2, SynthArch::kQwen3, SynthArch::kOlmo2,
                                           SynthArch::kGranite),
                         [](const ::testing::TestParamInfo<SynthArch>& info) {
                           return std::string(synth_arch_name(info.param));
                         });

}  // namespace
}  // namespace tokenmill::model
