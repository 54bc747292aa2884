// RoPE scaling read from hand-built metadata, the user's overrides, and the
// errors for what tokenmill does not implement: each names the file, the key
// and what is supported.
#include "model/rope_config.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "gguf/reader.h"
#include "gguf/writer.h"
#include "model/test_gguf_variants.h"
#include "util/error.h"

namespace tokenmill::model {
namespace {

using gguf::Value;
using test_files::config_error;
using test_files::f32_bytes;

gguf::GgufWriter metadata(const std::string& arch = "llama") {
  gguf::GgufWriter w;
  w.set("general.architecture", Value::str(arch));
  w.set(arch + ".context_length", Value::u32(512));
  w.set(arch + ".embedding_length", Value::u32(64));
  w.set(arch + ".block_count", Value::u32(2));
  w.set(arch + ".feed_forward_length", Value::u32(128));
  w.set(arch + ".attention.head_count", Value::u32(4));
  w.set(arch + ".vocab_size", Value::u32(32));
  return w;
}

ModelConfig config_of(const gguf::GgufWriter& w) {
  const std::vector<uint8_t> bytes = w.to_bytes();
  return ModelConfig::from_gguf(gguf::GgufFile::parse(bytes, "m.gguf"));
}

std::string override_error(ModelConfig c, const RopeOverrides& o) {
  try {
    apply_rope_overrides(c, o);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

#define EXPECT_HAS(text, needle) EXPECT_NE((text).find(needle), std::string::npos) << (text)

TEST(RopeConfig, UnknownArchitectureListsTheSupportedOnes) {
  const std::string e = config_error(metadata("mamba"));
  EXPECT_HAS(e, "m.gguf");
  EXPECT_HAS(e, "'mamba'");
  EXPECT_HAS(e, "llama, qwen2, gemma3, qwen3, olmo2, granite, phi3, gemma2");
}

TEST(RopeConfig, UnknownScalingTypeNamesTheKeyAndTheChoices) {
  gguf::GgufWriter w = metadata();
  w.set("llama.rope.scaling.type", Value::str("dynamic"));
  const std::string e = config_error(w);
  EXPECT_HAS(e, "'llama.rope.scaling.type' is 'dynamic'");
  EXPECT_HAS(e, "none, linear, yarn, llama3 (the rope_freqs tensor), longrope");
  // longrope is a type only with its tensors.
  w.set("llama.rope.scaling.type", Value::str("longrope"));
  EXPECT_HAS(config_error(w), "phi3 LongRoPE needs both tensors");
}

TEST(RopeConfig, BadFactorsAreErrorsNamingTheKey) {
  for (const Value& bad :
       {Value::f32(-2.0f), Value::f32(0.0f), Value::f32(std::numeric_limits<float>::quiet_NaN()), Value::str("four")}) {
    gguf::GgufWriter w = metadata();
    w.set("llama.rope.scaling.type", Value::str("yarn"));
    w.set("llama.rope.scaling.factor", bad);
    EXPECT_HAS(config_error(w), "llama.rope.scaling.factor");
  }
  gguf::GgufWriter missing = metadata();
  missing.set("llama.rope.scaling.type", Value::str("linear"));
  EXPECT_HAS(config_error(missing), "rope scaling 'linear' needs the key 'llama.rope.scaling.factor'");
  gguf::GgufWriter orig = metadata();
  orig.set("llama.rope.scaling.type", Value::str("yarn"));
  orig.set("llama.rope.scaling.factor", Value::f32(4));
  orig.set("llama.rope.scaling.original_context_length", Value::i32(-1));
  EXPECT_HAS(config_error(orig), "original_context_length' must be positive");
}

TEST(RopeConfig, UnimplementedYarnKeysAreRefusedByName) {
  gguf::GgufWriter w = metadata();
  w.set("llama.rope.scaling.type", Value::str("yarn"));
  w.set("llama.rope.scaling.factor", Value::f32(4));
  gguf::GgufWriter log_mul = w;
  log_mul.set("llama.rope.scaling.yarn_log_multiplier", Value::f32(0.1f));
  EXPECT_HAS(config_error(log_mul), "'llama.rope.scaling.yarn_log_multiplier'");
  gguf::GgufWriter attn = w;
  attn.set("llama.rope.scaling.yarn_attn_factor", Value::f32(0.7f));
  EXPECT_HAS(config_error(attn), "'llama.rope.scaling.yarn_attn_factor' is not supported");
  attn.set("llama.rope.scaling.yarn_attn_factor", Value::f32(1.0f));  // the neutral value is harmless
  EXPECT_EQ(config_error(attn), "(no error)");
}

TEST(RopeConfig, YarnReadsItsKeysAndDefaults) {
  gguf::GgufWriter w = metadata("qwen2");
  w.set("qwen2.rope.scaling.type", Value::str("yarn"));
  w.set("qwen2.rope.scaling.factor", Value::f32(4));
  ModelConfig c = config_of(w);
  EXPECT_EQ(c.rope_scaling, RopeScalingType::kYarn);
  EXPECT_FLOAT_EQ(c.rope_freq_scale, 0.25f);
  EXPECT_EQ(c.rope_orig_ctx, 512);  // no original_context_length: the training context
  EXPECT_EQ(c.yarn_ext_factor, 1.0f);
  EXPECT_EQ(c.yarn_beta_fast, 32.0f);
  EXPECT_EQ(c.yarn_beta_slow, 1.0f);
  w.set("qwen2.rope.scaling.original_context_length", Value::u32(64));
  w.set("qwen2.rope.scaling.attn_factor", Value::f32(0.8f));
  w.set("qwen2.rope.scaling.yarn_beta_fast", Value::f32(16));
  c = config_of(w);
  EXPECT_EQ(c.rope_orig_ctx, 64);
  const kernels::RopeScaling k = rope_scaling_params(c, false);
  EXPECT_EQ(k.orig_ctx, 64);
  EXPECT_FLOAT_EQ(static_cast<float>(k.attn_factor), 0.8f);
  EXPECT_EQ(k.beta_fast, 16.0);
  EXPECT_EQ(k.ext_factor, 1.0);
  EXPECT_HAS(rope_summary(c), "yarn x4 (original context 64");
}

TEST(RopeConfig, LinearIsNotYarnAndNoneIgnoresAStrayFactor) {
  gguf::GgufWriter w = metadata();
  w.set("llama.rope.scaling.type", Value::str("linear"));
  w.set("llama.rope.scaling.factor", Value::f32(2));
  const ModelConfig linear = config_of(w);
  EXPECT_FLOAT_EQ(linear.rope_freq_scale, 0.5f);
  EXPECT_EQ(rope_scaling_params(linear, false).ext_factor, 0.0);
  w.set("llama.rope.scaling.type", Value::str("none"));  // llama.cpp: "none" never scales
  EXPECT_EQ(config_of(w).rope_freq_scale, 1.0f);
}

TEST(RopeConfig, RopeFreqsTensorMeansLlama3) {
  gguf::GgufWriter w = metadata();
  std::vector<uint8_t> bytes(8 * sizeof(float));
  const float ones[8] = {1, 1, 1, 1, 1, 1, 1, 1};
  std::memcpy(bytes.data(), ones, bytes.size());
  w.add_tensor("rope_freqs.weight", gguf::TensorType::F32, {8}, bytes);
  const ModelConfig c = config_of(w);
  EXPECT_EQ(c.rope_scaling, RopeScalingType::kLlama3);
  EXPECT_HAS(override_error(c, {.scaling = "none"}), "scaled by its factor tensors (llama3)");
  EXPECT_HAS(override_error(c, {.scale = 2.0}), "the RoPE scaling is 'llama3', which takes no factor");
}

// Phi-3 LongRoPE: both factor tensors make it; the long ones apply when the
// context (after -c) exceeds the original one, as llama.cpp chooses.
TEST(RopeConfig, LongRopeFollowsTheContext) {
  gguf::GgufWriter w = metadata("phi3");
  w.set("phi3.rope.scaling.original_context_length", Value::u32(256));
  w.add_tensor("rope_factors_long.weight", gguf::TensorType::F32, {8}, f32_bytes(std::vector<float>(8, 4.0f)));
  EXPECT_HAS(config_error(w), "'rope_factors_short.weight' is missing");
  w.add_tensor("rope_factors_short.weight", gguf::TensorType::F32, {8}, f32_bytes(std::vector<float>(8, 1.0f)));
  ModelConfig c = config_of(w);
  EXPECT_EQ(c.rope_scaling, RopeScalingType::kLongRope);
  EXPECT_TRUE(rope_long_factors(c));  // context 512 > 256
  EXPECT_HAS(rope_summary(c), "longrope (long factors: context 512 > original 256)");
  apply_rope_overrides(c, {.ctx = 200});
  EXPECT_FALSE(rope_long_factors(c));
  EXPECT_HAS(override_error(c, {.scaling = "yarn", .scale = 2.0}), "scaled by its factor tensors (longrope)");
  EXPECT_HAS(override_error(c, {.scale = 2.0}), "'longrope', which takes no factor");
  w.set("phi3.rope.scaling.type", Value::str("linear"));
  w.set("phi3.rope.scaling.factor", Value::f32(2));
  EXPECT_HAS(config_error(w), "'phi3.rope.scaling.type' is 'linear' but the file carries LongRoPE factor tensors");
}

TEST(RopeConfig, OverridesAsLlamaCppSpellsThem) {
  const ModelConfig file = config_of(metadata());
  ModelConfig c = file;
  EXPECT_TRUE(apply_rope_overrides(c, {.scale = 4.0}).empty());
  EXPECT_EQ(c.rope_scaling, RopeScalingType::kLinear);  // a factor alone stretches linearly
  EXPECT_FLOAT_EQ(c.rope_freq_scale, 0.25f);

  c = file;
  apply_rope_overrides(c, {.scaling = "yarn", .scale = 8.0, .yarn_orig_ctx = 64, .ctx = 4096});
  EXPECT_EQ(c.rope_scaling, RopeScalingType::kYarn);
  EXPECT_EQ(c.rope_orig_ctx, 64);
  EXPECT_EQ(c.n_ctx_train, 4096);
  EXPECT_EQ(c.n_ctx_file, 512);

  c = file;
  apply_rope_overrides(c, {.freq_base = 500.0});
  EXPECT_EQ(c.rope_base, 500.0f);
  EXPECT_EQ(c.rope_scaling, RopeScalingType::kNone);

  EXPECT_HAS(override_error(file, {.scale = 0.0}), "--rope-scale 0: must be a positive number");
  EXPECT_HAS(override_error(file, {.scaling = "longrope"}), "--rope-scaling 'longrope': expected none, linear or yarn");
  EXPECT_HAS(override_error(file, {.scaling = "yarn"}), "give the factor with --rope-scale");
  EXPECT_HAS(override_error(file, {.freq_base = -1.0}), "--rope-freq-base");
  EXPECT_HAS(override_error(file, {.ctx = 0}), "--ctx 0");
}

TEST(RopeConfig, AContextPastTheTrainedOneWarnsUnlessScaled) {
  const ModelConfig file = config_of(metadata());
  ModelConfig c = file;
  const std::vector<std::string> w = apply_rope_overrides(c, {.ctx = 2048});
  ASSERT_EQ(w.size(), 1u);
  EXPECT_HAS(w[0], "context 2048 exceeds the 512 positions the model was trained on");
  c = file;
  EXPECT_TRUE(apply_rope_overrides(c, {.scaling = "yarn", .scale = 4.0, .ctx = 2048}).empty());
  c = file;
  EXPECT_TRUE(apply_rope_overrides(c, {.ctx = 256}).empty());
}

TEST(RopeConfig, Gemma3LocalLayersAreNeverStretched) {
  gguf::GgufWriter w = metadata("gemma3");
  w.set("gemma3.rope.scaling.type", Value::str("linear"));
  w.set("gemma3.rope.scaling.factor", Value::f32(8));
  ModelConfig c = config_of(w);
  EXPECT_FLOAT_EQ(c.rope_freq_scale, 0.125f);
  EXPECT_EQ(c.rope_freq_scale_local, 1.0f);
  apply_rope_overrides(c, {.scale = 2.0});
  EXPECT_FLOAT_EQ(c.rope_freq_scale, 0.5f);
  EXPECT_EQ(c.rope_freq_scale_local, 1.0f);
}

// As llama.cpp: --rope-scale and --rope-freq-base are the global layers';
// sliding-window layers keep the file's base and scale.
TEST(RopeConfig, OverridesLeaveSlidingWindowLayersAlone) {
  gguf::GgufWriter w = metadata("gemma2");
  w.set("gemma2.attention.sliding_window", Value::u32(8));
  ModelConfig c = config_of(w);
  ASSERT_TRUE(c.layer_is_local[0]);
  apply_rope_overrides(c, {.scale = 2.0, .freq_base = 500.0});
  EXPECT_FLOAT_EQ(c.rope_freq_scale, 0.5f);
  EXPECT_EQ(c.rope_base, 500.0f);
  EXPECT_EQ(c.rope_freq_scale_local, 1.0f);
  EXPECT_EQ(c.rope_base_local, 10000.0f);
}

}  // namespace
}  // namespace tokenmill::model
