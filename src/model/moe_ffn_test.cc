// Mixture-of-experts FFN: the router's softmax and top-k, grouping by
// expert against the per-token order (bit for bit where the kernels' results
// do not depend on the token count: the integer paths of quantized weights),
// the expert load counts, and the refusals of malformed MoE files.
#include "model/moe_ffn.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <numeric>

#include "kernels/dispatch.h"
#include "model/single_sequence.h"
#include "model/synth.h"
#include "model/test_gguf_variants.h"
#include "util/error.h"

namespace tokenmill::model {
namespace {

using test_files::random_tokens;

TEST(MoeRouting, SoftmaxTopKAndRenormalisation) {
  // Two tokens over four experts; logits chosen so the order is known.
  const float logits[] = {1.0f, 3.0f, 2.0f,  0.0f,   // token 0: experts 1, 2 lead
                          0.5f, 0.5f, -1.0f, 0.5f};  // token 1: a three-way tie
  double z0 = 0;
  for (float l : {1.0f, 3.0f, 2.0f, 0.0f}) z0 += std::exp(l - 3.0);
  ExpertRouting r;
  route_tokens(logits, 2, 4, 2, /*normalise=*/false, r);
  EXPECT_EQ(r.experts[0], 1);
  EXPECT_EQ(r.experts[1], 2);
  EXPECT_NEAR(r.weights[0], 1.0 / z0, 1e-6);
  EXPECT_NEAR(r.weights[1], std::exp(-1.0) / z0, 1e-6);
  // Ties go to the lower expert.
  EXPECT_EQ(r.experts[2], 0);
  EXPECT_EQ(r.experts[3], 1);
  route_tokens(logits, 2, 4, 2, /*normalise=*/true, r);
  EXPECT_NEAR(r.weights[0] + r.weights[1], 1.0, 1e-6);
  EXPECT_NEAR(r.weights[0] / r.weights[1], std::exp(1.0), 1e-5);
  EXPECT_NEAR(r.weights[2], 0.5, 1e-6);
  // All experts: the weights are the whole softmax.
  route_tokens(logits, 1, 4, 4, false, r);
  EXPECT_NEAR(std::accumulate(r.weights.begin(), r.weights.end(), 0.0), 1.0, 1e-6);
  EXPECT_EQ(r.experts[3], 3);
}

// A synthetic MoE model of `arch` in `type`, written to a temporary file
// and loaded.
class MoeModelFile {
 public:
  MoeModelFile(SynthArch arch, const std::string& type, const ShapeOverrides& o = {}) {
    SynthOptions opts;
    opts.arch = arch;
    opts.format = *parse_weight_format(type);
    opts.overrides = o;
    opts.seed = 11;
    opts.num_threads = 2;
    path_ = std::filesystem::temp_directory_path() /
            ("moe_ffn_test_" + std::string(synth_arch_name(arch)) + type + std::to_string(getpid()) + ".gguf");
    write_synth_model(opts, path_.string());
    model_ = Model::load(path_.string());
  }
  ~MoeModelFile() {
    model_.reset();
    std::filesystem::remove(path_);
  }
  Model& model() { return *model_; }

 private:
  std::filesystem::path path_;
  std::unique_ptr<Model> model_;
};

std::vector<float> all_logits(Model& m, std::span<const int32_t> tokens, int64_t chunk, ThreadPool& pool) {
  SingleSequence seq(m, static_cast<int64_t>(tokens.size()), kv::KvDtype::F32);
  std::vector<float> out, logits;
  for (size_t i = 0; i < tokens.size(); i += static_cast<size_t>(chunk)) {
    const size_t n = std::min(tokens.size() - i, static_cast<size_t>(chunk));
    seq.forward(tokens.subspan(i, n), true, logits, pool);
    out.insert(out.end(), logits.begin(), logits.end());
  }
  return out;
}

struct MoeCase {
  SynthArch arch;
  const char* type;
  gguf::TensorType experts;  // the experts' storage type
};

// Whether the active kernels multiply `type` on integer paths at every
// token count (decode rows and the int16 packed prefill kernel share their
// numerics, so a token's result does not depend on the call's token count).
// Float weights, and tables without an int16 prefill kernel for the type
// (NEON's K-quants), take float paths whose rounding does.
bool integer_at_every_count(gguf::TensorType type) {
  const kernels::KernelTable& kt = kernels::active_kernels();
  const kernels::TypeKernels& k = kt.of(type);
  return k.q16_rows != nullptr && k.q16_decode_row != nullptr && kt.gemm_q16_packed != nullptr;
}

class MoeGrouping : public ::testing::TestWithParam<MoeCase> {};

// Prefill in chunks of 1 (decode-sized calls), 5 and 40 tokens: grouped and
// per-token expert compute agree (bit for bit on integer paths, within
// float rounding elsewhere), and every layer routes every token to
// n_expert_used experts.
TEST_P(MoeGrouping, GroupedEqualsPerToken) {
  const MoeCase c = GetParam();
  ShapeOverrides o;
  o.n_embd = 256;  // rows that fit the 256-element K-quant blocks
  o.n_ff_exp = 256;
  o.n_expert = 8;
  o.n_expert_used = 3;
  MoeModelFile file(c.arch, c.type, o);
  Model& m = file.model();
  ThreadPool pool(2);
  const std::vector<int32_t> tokens = random_tokens(40, m.config().n_vocab, 7);
  for (int64_t chunk : {1, 5, 40}) {
    m.set_expert_compute(ExpertCompute::kGrouped);
    const std::vector<float> grouped = all_logits(m, tokens, chunk, pool);
    const std::span<const int64_t> load = m.expert_load();
    ASSERT_EQ(static_cast<int64_t>(load.size()), m.config().n_layer * 8);
    const int64_t last_chunk = 40 % chunk == 0 ? chunk : 40 % chunk;
    for (int64_t l = 0; l < m.config().n_layer; ++l)
      EXPECT_EQ(std::accumulate(load.begin() + l * 8, load.begin() + (l + 1) * 8, int64_t{0}), last_chunk * 3);
    m.set_expert_compute(ExpertCompute::kPerToken);
    const std::vector<float> per_token = all_logits(m, tokens, chunk, pool);
    ASSERT_EQ(grouped.size(), per_token.size());
    if (integer_at_every_count(c.experts)) {
      EXPECT_EQ(0, std::memcmp(grouped.data(), per_token.data(), grouped.size() * sizeof(float)))
          << c.type << " chunk " << chunk;
    } else {
      // One token per call takes the int16-activation decode path, many the
      // float one: 2^-16 relative per activation block, a few 1e-4 on logits
      // after the layers (test_arch_reference.py's integer-path bound); a
      // wrong expert or weight moves them by 0.1..1.
      for (size_t i = 0; i < grouped.size(); ++i)
        ASSERT_NEAR(grouped[i], per_token[i], 2e-3 * (1.0 + std::fabs(per_token[i]))) << c.type << " at " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, MoeGrouping,
                         ::testing::Values(MoeCase{SynthArch::kQwen3Moe, "Q4_K", gguf::TensorType::Q4_K},
                                           MoeCase{SynthArch::kQwen2Moe, "Q8_0", gguf::TensorType::Q8_0},
                                           MoeCase{SynthArch::kOlmoe, "Q4_0", gguf::TensorType::Q4_0},
                                           MoeCase{SynthArch::kLlama, "Q6_K", gguf::TensorType::Q6_K},
                                           MoeCase{SynthArch::kQwen3Moe, "F32", gguf::TensorType::F32},
                                           MoeCase{SynthArch::kQwen2Moe, "F16", gguf::TensorType::F16}),
                         [](const auto& info) {
                           return std::string(synth_arch_name(info.param.arch)) + "_" + info.param.type;
                         });

// The interleaved copies and the thread count do not change the bits.
TEST(MoeGrouping, ThreadCountDoesNotChangeResults) {
  MoeModelFile file(SynthArch::kQwen3Moe, "Q8_0");
  ThreadPool one(1), three(3);
  const std::vector<int32_t> tokens = random_tokens(24, file.model().config().n_vocab, 3);
  const std::vector<float> a = all_logits(file.model(), tokens, 24, one);
  const std::vector<float> b = all_logits(file.model(), tokens, 24, three);
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)));
}

std::string moe_load_error(SynthArch arch, const test_files::Edit& edit) {
  return test_files::load_error(*test_files::variant(arch, edit)->file);
}

TEST(MoeConfig, MissingOrImpossibleExpertKeysAreNamed) {
  EXPECT_NE(moe_load_error(SynthArch::kQwen3Moe, test_files::dropping("qwen3moe.expert_count"))
                .find("qwen3moe needs the key 'qwen3moe.expert_count'"),
            std::string::npos);
  EXPECT_NE(moe_load_error(SynthArch::kOlmoe, test_files::dropping("olmoe.expert_used_count"))
                .find("'olmoe.expert_used_count', which is missing"),
            std::string::npos);
  EXPECT_NE(moe_load_error(SynthArch::kQwen2Moe, test_files::setting("qwen2moe.expert_used_count", gguf::Value::u32(9)))
                .find("expert_used_count' must be in 1..4"),
            std::string::npos);
  EXPECT_NE(
      moe_load_error(SynthArch::kQwen3Moe, test_files::setting("qwen3moe.expert_group_count", gguf::Value::u32(2)))
          .find("grouped expert routing"),
      std::string::npos);
  EXPECT_NE(
      moe_load_error(SynthArch::kQwen3Moe, test_files::setting("qwen3moe.expert_gating_func", gguf::Value::u32(2)))
          .find("only softmax gating"),
      std::string::npos);
  EXPECT_NE(moe_load_error(SynthArch::kQwen3Moe, test_files::dropping("blk.1.ffn_down_exps.weight"))
                .find("'blk.1.ffn_down_exps.weight' is missing"),
            std::string::npos);
  EXPECT_NE(moe_load_error(SynthArch::kQwen2Moe, test_files::dropping("blk.0.ffn_gate_inp_shexp.weight"))
                .find("ffn_gate_inp_shexp.weight"),
            std::string::npos);
  EXPECT_EQ(moe_load_error(SynthArch::kOlmoe, {}), "(no error)");
}

TEST(MoeConfig, ExpertsStoredOneTensorEachAreRefusedByName) {
  test_files::Edit edit = test_files::dropping("blk.0.ffn_gate_exps.weight");
  edit.extra = "blk.0.ffn_gate.0.weight";
  EXPECT_NE(moe_load_error(SynthArch::kQwen3Moe, edit).find("experts are stored one tensor each"), std::string::npos);
}

TEST(MoeConfig, ArchitecturesReadTheirRoutingRules) {
  for (SynthArch arch : {SynthArch::kQwen2Moe, SynthArch::kQwen3Moe, SynthArch::kOlmoe}) {
    const auto f = test_files::variant(arch);
    const ModelConfig c = ModelConfig::from_gguf(*f->file);
    EXPECT_TRUE(c.is_moe());
    EXPECT_EQ(c.n_expert, 4);
    EXPECT_EQ(c.n_expert_used, 2);
    EXPECT_EQ(c.expert_weights_norm, arch == SynthArch::kQwen3Moe) << synth_arch_name(arch);
    EXPECT_EQ(c.n_ff_shexp > 0, arch == SynthArch::kQwen2Moe);
  }
  ShapeOverrides o;
  o.n_expert = 8;
  const ModelConfig mixtral = ModelConfig::from_gguf(*test_files::variant(SynthArch::kLlama, {}, "F32", o)->file);
  EXPECT_TRUE(mixtral.expert_weights_norm);
  EXPECT_EQ(mixtral.n_ff_exp, mixtral.n_ff);
  EXPECT_FALSE(ModelConfig::from_gguf(*test_files::variant(SynthArch::kLlama)->file).is_moe());
}

TEST(MoeSynth, ShapesAndRefusals) {
  ShapeOverrides o;
  o.n_expert_used = 5;
  EXPECT_THROW(resolve_synth_shape(SynthArch::kQwen3Moe, "tiny", o), Error);
  ShapeOverrides dense;
  dense.n_expert = 4;
  EXPECT_THROW(resolve_synth_shape(SynthArch::kQwen3, "tiny", dense), Error);
  ShapeOverrides shared;
  shared.n_ff_shexp = 64;
  EXPECT_THROW(resolve_synth_shape(SynthArch::kQwen3Moe, "tiny", shared), Error);
  const SynthShape mini = resolve_synth_shape(SynthArch::kQwen3Moe, "qwen3moe-mini", {});
  EXPECT_EQ(mini.n_expert, 64);
  EXPECT_EQ(mini.n_expert_used, 8);
  EXPECT_EQ(mini.n_ff_exp, 512);
  // llama and olmoe store no expert width: it is the FFN width.
  const SynthShape mixtral = resolve_synth_shape(SynthArch::kLlama, "qwen3moe-mini", {});
  EXPECT_EQ(mixtral.n_ff, 512);
  EXPECT_EQ(resolve_synth_shape(SynthArch::kLlama, "tiny", {}).n_expert, 0);
}

}  // namespace
}  // namespace tokenmill::model
