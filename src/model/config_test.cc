// ModelConfig::from_gguf on hand-built metadata: values a file may hold in
// any type must be rejected with tokenmill::Error, never a CHECK abort; and
// each architecture's keys and tensors on synthetic files, with the errors
// that name a missing or unsupported one.
#include "model/config.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gguf/reader.h"
#include "gguf/writer.h"
#include "model/synth.h"
#include "model/test_gguf_variants.h"
#include "model/weights.h"
#include "util/error.h"

namespace tokenmill::model {
namespace {

using gguf::Value;
using test_files::adding;
using test_files::config_error;
using test_files::dropping;
using test_files::Edit;
using test_files::load_error;
using test_files::setting;
using test_files::variant;

ShapeOverrides head_dim(int64_t n) {
  ShapeOverrides o;
  o.head_dim = n;
  return o;
}

// The smallest llama metadata from_gguf reads before the vocabulary size.
gguf::GgufWriter llama_metadata() {
  gguf::GgufWriter w;
  w.set("general.architecture", Value::str("llama"));
  w.set("llama.embedding_length", Value::u32(64));
  w.set("llama.block_count", Value::u32(1));
  w.set("llama.feed_forward_length", Value::u32(128));
  w.set("llama.attention.head_count", Value::u32(4));
  return w;
}

// Found by review after fuzzing found the same mistake in the tokenizer: the
// vocabulary size was read with Value::as_int, which aborts on a uint64
// above INT64_MAX and on a string.
TEST(ModelConfig, VocabSizeOfAnyTypeOrValueIsAnErrorNotAnAbort) {
  gguf::GgufWriter huge = llama_metadata();
  huge.set("llama.vocab_size", Value::u64(UINT64_MAX));
  EXPECT_NE(config_error(huge).find("llama.vocab_size"), std::string::npos) << config_error(huge);
  gguf::GgufWriter text = llama_metadata();
  text.set("llama.vocab_size", Value::str("many"));
  EXPECT_NE(config_error(text).find("llama.vocab_size"), std::string::npos) << config_error(text);
}

// ---- qwen3, olmo2, granite: the keys and tensors each one needs ----

TEST(ModelConfig, Qwen3NormalisesEachHeadAndDecouplesTheHeadSize) {
  const auto m = variant(SynthArch::kQwen3, {}, "F32", head_dim(32));
  const ModelConfig c = ModelConfig::from_gguf(*m->file);
  EXPECT_EQ(c.arch, Arch::Qwen3);
  EXPECT_TRUE(c.rope_neox);
  EXPECT_EQ(c.qk_norm, ModelConfig::QkNorm::kPerHead);
  EXPECT_TRUE(c.pre_norm);
  EXPECT_FALSE(c.post_norms);
  EXPECT_EQ(c.head_dim, 32);
  EXPECT_EQ(c.n_q_dim(), 128);  // not n_embd (64)
  EXPECT_FLOAT_EQ(c.attn_scale, 1.0f / std::sqrt(32.0f));
  const ModelWeights w = ModelWeights::bind(*m->file, c);
  EXPECT_EQ(w.layers[0].q_norm.size, 32);
  EXPECT_EQ(w.layers[0].k_norm.size, 32);
  EXPECT_FALSE(w.layers[0].bq.present());
}

TEST(ModelConfig, Olmo2NormalisesAfterTheBlocksAndQkOverTheWholeProjection) {
  const auto m = variant(SynthArch::kOlmo2);
  const ModelConfig c = ModelConfig::from_gguf(*m->file);
  EXPECT_TRUE(c.rope_neox);
  EXPECT_FALSE(c.pre_norm);
  EXPECT_TRUE(c.post_norms);
  EXPECT_EQ(c.qk_norm, ModelConfig::QkNorm::kFullWidth);
  const ModelWeights w = ModelWeights::bind(*m->file, c);
  EXPECT_FALSE(w.layers[1].attn_norm.present());
  EXPECT_FALSE(w.layers[1].ffn_norm.present());
  EXPECT_EQ(w.layers[1].q_norm.size, c.n_q_dim());
  EXPECT_EQ(w.layers[1].k_norm.size, c.n_kv_dim());
  EXPECT_TRUE(w.layers[1].post_attn_norm.present());
  EXPECT_TRUE(w.layers[1].post_ffn_norm.present());
}

TEST(ModelConfig, Olmo2WithASlidingWindowIsRefusedNamingTheKey) {
  const auto m = variant(SynthArch::kOlmo2, setting("olmo2.attention.sliding_window", Value::u32(4)));
  const std::string e = load_error(*m->file);
  EXPECT_NE(e.find("olmo2.attention.sliding_window"), std::string::npos) << e;
}

TEST(ModelConfig, GraniteReadsItsFourMultipliers) {
  const auto m = variant(SynthArch::kGranite);
  const ModelConfig c = ModelConfig::from_gguf(*m->file);
  EXPECT_FALSE(c.rope_neox);
  EXPECT_FLOAT_EQ(c.embd_scale, 12.0f);
  EXPECT_FLOAT_EQ(c.residual_scale, 0.22f);
  EXPECT_FLOAT_EQ(c.attn_scale, 0.015625f);
  EXPECT_FLOAT_EQ(c.logit_scale, 8.0f);
}

TEST(ModelConfig, GraniteOptionalMultipliersOfZeroOrAbsentAreNotApplied) {
  const auto m =
      variant(SynthArch::kGranite, Edit{"granite.attention.scale", {{"granite.residual_scale", Value::f32(0.0f)}}, ""});
  const ModelConfig c = ModelConfig::from_gguf(*m->file);
  EXPECT_FLOAT_EQ(c.residual_scale, 1.0f);
  EXPECT_FLOAT_EQ(c.attn_scale, 1.0f / std::sqrt(static_cast<float>(c.head_dim)));
}

TEST(ModelConfig, GraniteWithoutLogitScaleOrWithANegativeMultiplierIsAnError) {
  const auto missing = variant(SynthArch::kGranite, dropping("granite.logit_scale"));
  std::string e = load_error(*missing->file);
  EXPECT_NE(e.find("granite.logit_scale"), std::string::npos) << e;
  EXPECT_NE(e.find("granite.gguf"), std::string::npos) << e;
  const auto negative = variant(SynthArch::kGranite, setting("granite.residual_scale", Value::f32(-1.0f)));
  e = load_error(*negative->file);
  EXPECT_NE(e.find("granite.residual_scale"), std::string::npos) << e;
  // Granite reads rope.scaling.finetuned = false as "no RoPE", which tokenmill does not run.
  const auto no_rope = variant(SynthArch::kGranite, setting("granite.rope.scaling.finetuned", Value::boolean(false)));
  e = load_error(*no_rope->file);
  EXPECT_NE(e.find("granite.rope.scaling.finetuned"), std::string::npos) << e;
}

TEST(ModelWeights, AMissingNormOfTheNewArchitecturesIsNamed) {
  for (const auto& [arch, tensor] : {std::pair{SynthArch::kQwen3, "blk.1.attn_k_norm.weight"},
                                     std::pair{SynthArch::kOlmo2, "blk.0.attn_q_norm.weight"},
                                     std::pair{SynthArch::kOlmo2, "blk.1.post_ffw_norm.weight"},
                                     std::pair{SynthArch::kGranite, "blk.0.ffn_norm.weight"}}) {
    const auto m = variant(arch, dropping(tensor));
    const std::string e = load_error(*m->file);
    EXPECT_NE(e.find(tensor), std::string::npos) << e;
    EXPECT_NE(e.find("missing"), std::string::npos) << e;
  }
}

TEST(ModelWeights, AnUnusedBiasIsRefusedRatherThanIgnored) {
  const auto m = variant(SynthArch::kGranite, adding("blk.0.attn_output.bias"));
  const std::string e = load_error(*m->file);
  EXPECT_NE(e.find("blk.0.attn_output.bias"), std::string::npos) << e;
  EXPECT_NE(e.find("granite"), std::string::npos) << e;
}

}  // namespace
}  // namespace tokenmill::model
