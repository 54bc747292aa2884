// Model weights repacked at load (kernels/interleave.h): on tiny synthetic
// Q4_0, Q5_0, Q8_0 and Q4_K_M llamas (and a Q8_0 phi3, whose matrices are row
// views of fused tensors), a model loaded with the interleaved copies gives the logits of
// one loaded without them (TOKENMILL_REPACK=0) within the integer decode
// path's float reordering, chunked prefill and token-by-token decode alike;
// the WeightViews keep pointing into the file; bad TOKENMILL_REPACK values
// are rejected.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <numeric>
#include <string>
#include <vector>

#include "kernels/dispatch.h"
#include "kv/paged_kv_storage.h"
#include "model/model.h"
#include "model/synth.h"
#include "util/error.h"

namespace tokenmill::model {
namespace {

class Q4File {
 public:
  explicit Q4File(const std::string& format = "Q4_0", SynthArch arch = SynthArch::kLlama) {
    SynthOptions o;
    o.arch = arch;
    o.preset = "tiny";
    o.format = *parse_weight_format(format);
    // Rows of 256 columns, so that the K-quant tensors stay Q4_K (narrower
    // rows fall back to a legacy type).
    o.overrides.n_embd = 256;
    o.overrides.n_ff = 512;
    o.seed = 11;
    o.num_threads = 2;
    path_ = std::filesystem::temp_directory_path() /
            ("tm_interleaved_" + format + "_" + std::string(synth_arch_name(arch)) + "_" + std::to_string(getpid()) +
             ".gguf");
    write_synth_model(o, path_.string());
  }
  ~Q4File() { std::filesystem::remove(path_); }
  std::string path() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

std::unique_ptr<Model> load_with_repack(const std::string& path, const char* value) {
  ::setenv("TOKENMILL_REPACK", value, 1);
  auto m = Model::load(path);
  ::unsetenv("TOKENMILL_REPACK");
  return m;
}

// The prefill chunk: more tokens than any kernel table sends to its row
// kernels (AVX2: 16), so that without the copy it runs the int16 packed
// GEMM, whose numerics the interleaved kernels reproduce bit for bit.
constexpr int64_t kPrefill = 20;

// Logits of 28 tokens: a kPrefill-token chunk, then one token per step.
std::vector<float> logits_of(Model& m, ThreadPool& pool) {
  std::vector<int32_t> tokens(28);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>((i * 37 + 5) % m.config().n_vocab);
  kv::PagedKvStorage kv(m.kv_geometry(4, kv::KvDtype::F32), 8);
  std::vector<int32_t> table(8);
  std::iota(table.begin(), table.end(), 0);
  std::vector<float> all, logits;
  for (size_t pos = 0; pos < tokens.size(); pos += pos == 0 ? kPrefill : 1) {
    const size_t n = pos == 0 ? kPrefill : 1;
    const ChunkTable tables[] = {{table, 0}};
    const SequenceChunk c{{tokens.data() + pos, n}, static_cast<int64_t>(pos), tables, LogitRows::kAll};
    m.forward({&c, 1}, kv, logits, pool);
    all.insert(all.end(), logits.begin(), logits.end());
  }
  return all;
}

// Logits with and without the interleaved copy. Decode steps sum in another
// order (q16_rows reduces 8 blocks at a time); the next layer's int16
// activations can then round the other way, which moves logits by about
// 1e-4 of their scale here (measured 5e-5). A wrong kernel moves them by O(1).
void expect_close_logits(const std::vector<float>& a, const std::vector<float>& b) {
  ASSERT_EQ(a.size(), b.size());
  double max_diff = 0, max_logit = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    max_diff = std::max(max_diff, std::fabs(double(a[i]) - b[i]));
    max_logit = std::max(max_logit, std::fabs(double(a[i])));
  }
  EXPECT_LT(max_diff, 5e-4 * std::max(1.0, max_logit)) << "max |logit| " << max_logit;
}

class InterleavedWeights : public ::testing::TestWithParam<std::string> {};

TEST_P(InterleavedWeights, SameLogitsWithAndWithoutTheCopy) {
  const Q4File file(GetParam());
  ThreadPool pool(2);
  auto plain = load_with_repack(file.path(), "0");
  auto packed = load_with_repack(file.path(), "1");
  const auto& l0 = packed->weights().layers[0];
  EXPECT_EQ(plain->weights().layers[0].wq.interleaved, nullptr);
  EXPECT_EQ(l0.wq.data, packed->file().tensor("blk.0.attn_q.weight").data) << "the view still points into the file";
  const bool supported = kernels::active_kernels().of(l0.wq.type).gemm_interleaved != nullptr;
  EXPECT_EQ(l0.wq.interleaved != nullptr, supported);
  EXPECT_EQ(l0.w_gate.interleaved != nullptr, supported);
  if (!supported) {
    GTEST_SKIP() << "the active kernel table (" << kernels::isa_name(kernels::active_kernels().isa)
                 << ") has no interleaved kernel";
  }
  const std::vector<float> a = logits_of(*plain, pool), b = logits_of(*packed, pool);
  expect_close_logits(a, b);
  // The prefill chunk goes through the int16 packed GEMM either way (same
  // numerics: equal bits); only decode steps reorder float sums.
  const kernels::KernelTable& kt = kernels::active_kernels();
  for (const kernels::TypeKernels& k : kt.types) ASSERT_GT(kPrefill, k.q16_row_max_tokens);
  const int64_t vocab = plain->config().n_vocab;
  for (int64_t i = 0; i < kPrefill * vocab; ++i) ASSERT_EQ(a[static_cast<size_t>(i)], b[static_cast<size_t>(i)]) << i;
}

INSTANTIATE_TEST_SUITE_P(Formats, InterleavedWeights, ::testing::Values("Q4_0", "Q5_0", "Q8_0", "Q4_K_M"));

// phi3's q/k/v and gate/up are row ranges of two fused tensors: each view
// gets its own copy of its rows, and the logits are those without copies.
TEST(InterleavedWeights, FusedPhi3ViewsAreRepackedOneByOne) {
  const Q4File file("Q8_0", SynthArch::kPhi3);
  ThreadPool pool(2);
  auto plain = load_with_repack(file.path(), "0");
  auto packed = load_with_repack(file.path(), "1");
  const LayerWeights& l = packed->weights().layers[1];
  if (kernels::active_kernels().of(l.wq.type).gemm_interleaved == nullptr) GTEST_SKIP() << "no interleaved kernel";
  const uint8_t* qkv = packed->file().tensor("blk.1.attn_qkv.weight").data;
  EXPECT_EQ(l.wq.data, qkv);
  EXPECT_EQ(l.wk.data, qkv + l.wq.rows * gguf::row_bytes(l.wq.type, l.wq.cols));
  for (const kernels::WeightView* w : {&l.wq, &l.wk, &l.wv, &l.w_gate, &l.w_up}) EXPECT_NE(w->interleaved, nullptr);
  EXPECT_NE(l.wk.interleaved, l.wq.interleaved);
  const std::vector<float> a = logits_of(*plain, pool), b = logits_of(*packed, pool);
  expect_close_logits(a, b);
}

TEST(InterleavedWeightsSetting, BadRepackSettingIsRejected) {
  const Q4File file;
  EXPECT_THROW(load_with_repack(file.path(), "yes"), Error);
  ::unsetenv("TOKENMILL_REPACK");
}

}  // namespace
}  // namespace tokenmill::model
