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
#include "model/weights.h"
#include "util/error.h"

namespace tokenmill::model {
namespace {

using gguf::Value;

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

std::string error_of(const gguf::GgufWriter& w) {
  const std::vector<uint8_t> bytes = w.to_bytes();
  try {
    const gguf::GgufFile f = gguf::GgufFile::parse(bytes, "bad.gguf");
    ModelConfig::from_gguf(f);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// Found by review after fuzzing found the same mistake in the tokenizer: the
// vocabulary size was read with Value::as_int, which aborts on a uint64
// above INT64_MAX and on a string.
TEST(ModelConfig, VocabSizeOfAnyTypeOrValueIsAnErrorNotAnAbort) {
  gguf::GgufWriter huge = llama_metadata();
  huge.set("llama.vocab_size", Value::u64(UINT64_MAX));
  EXPECT_NE(error_of(huge).find("llama.vocab_size"), std::string::npos) << error_of(huge);
  gguf::GgufWriter text = llama_metadata();
  text.set("llama.vocab_size", Value::str("many"));
  EXPECT_NE(error_of(text).find("llama.vocab_size"), std::string::npos) << error_of(text);
}

// ---- qwen3, olmo2, granite: the keys and tensors each one needs ----

// A synthetic model of `arch` rewritten: without the key or tensor named
// `drop`, with the metadata in `set` added or replaced and an extra F32
// tensor `extra` of 64 zeros when given.
struct Rewritten {
  std::vector<uint8_t> bytes;
  std::optional<gguf::GgufFile> file;
};

std::unique_ptr<Rewritten> synth_variant(SynthArch arch, const std::string& drop = "",
                                         const std::vector<std::pair<std::string, Value>>& set = {},
                                         const std::string& extra = "", std::optional<int64_t> head_dim = {}) {
  SynthOptions o;
  o.arch = arch;
  o.overrides.head_dim = head_dim;
  o.num_threads = 1;
  const std::vector<uint8_t> original = build_synth_model(o, nullptr).to_bytes();
  const gguf::GgufFile f = gguf::GgufFile::parse(original, "original");
  gguf::GgufWriter w;
  for (const gguf::MetadataEntry& e : f.metadata())
    if (e.key != drop) w.set(e.key, e.value);
  for (const auto& [key, value] : set) w.set(key, value);
  for (const gguf::TensorInfo& t : f.tensors()) {
    if (t.name == drop) continue;
    w.add_tensor(t.name, t.type, std::vector<int64_t>(t.dims, t.dims + t.num_dims),
                 std::vector<uint8_t>(t.data, t.data + t.num_bytes));
  }
  if (!extra.empty()) w.add_tensor(extra, gguf::TensorType::F32, {64}, std::vector<uint8_t>(64 * sizeof(float)));
  auto r = std::make_unique<Rewritten>();
  r->bytes = w.to_bytes();
  r->file.emplace(gguf::GgufFile::parse(r->bytes, std::string(synth_arch_name(arch)) + ".gguf"));
  return r;
}

// The message of the Error that loading config and weights throws, or "".
std::string load_error(const gguf::GgufFile& f) {
  try {
    ModelWeights::bind(f, ModelConfig::from_gguf(f));
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(ModelConfig, Qwen3NormalisesEachHeadAndDecouplesTheHeadSize) {
  const auto m = synth_variant(SynthArch::kQwen3, "", {}, "", 32);
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
  const auto m = synth_variant(SynthArch::kOlmo2);
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
  const auto m = synth_variant(SynthArch::kOlmo2, "", {{"olmo2.attention.sliding_window", Value::u32(4)}});
  const std::string e = load_error(*m->file);
  EXPECT_NE(e.find("olmo2.attention.sliding_window"), std::string::npos) << e;
}

TEST(ModelConfig, GraniteReadsItsFourMultipliers) {
  const auto m = synth_variant(SynthArch::kGranite);
  const ModelConfig c = ModelConfig::from_gguf(*m->file);
  EXPECT_FALSE(c.rope_neox);
  EXPECT_FLOAT_EQ(c.embd_scale, 12.0f);
  EXPECT_FLOAT_EQ(c.residual_scale, 0.22f);
  EXPECT_FLOAT_EQ(c.attn_scale, 0.015625f);
  EXPECT_FLOAT_EQ(c.logit_scale, 8.0f);
}

TEST(ModelConfig, GraniteOptionalMultipliersOfZeroOrAbsentAreNotApplied) {
  const auto m =
      synth_variant(SynthArch::kGranite, "granite.attention.scale", {{"granite.residual_scale", Value::f32(0.0f)}});
  const ModelConfig c = ModelConfig::from_gguf(*m->file);
  EXPECT_FLOAT_EQ(c.residual_scale, 1.0f);
  EXPECT_FLOAT_EQ(c.attn_scale, 1.0f / std::sqrt(static_cast<float>(c.head_dim)));
}

TEST(ModelConfig, GraniteWithoutLogitScaleOrWithANegativeMultiplierIsAnError) {
  const auto missing = synth_variant(SynthArch::kGranite, "granite.logit_scale");
  std::string e = load_error(*missing->file);
  EXPECT_NE(e.find("granite.logit_scale"), std::string::npos) << e;
  EXPECT_NE(e.find("granite.gguf"), std::string::npos) << e;
  const auto negative = synth_variant(SynthArch::kGranite, "", {{"granite.residual_scale", Value::f32(-1.0f)}});
  e = load_error(*negative->file);
  EXPECT_NE(e.find("granite.residual_scale"), std::string::npos) << e;
  // Granite reads rope.scaling.finetuned = false as "no RoPE", which tokenmill does not run.
  const auto no_rope =
      synth_variant(SynthArch::kGranite, "", {{"granite.rope.scaling.finetuned", Value::boolean(false)}});
  e = load_error(*no_rope->file);
  EXPECT_NE(e.find("granite.rope.scaling.finetuned"), std::string::npos) << e;
}

TEST(ModelWeights, AMissingNormOfTheNewArchitecturesIsNamed) {
  for (const auto& [arch, tensor] : {std::pair{SynthArch::kQwen3, "blk.1.attn_k_norm.weight"},
                                     std::pair{SynthArch::kOlmo2, "blk.0.attn_q_norm.weight"},
                                     std::pair{SynthArch::kOlmo2, "blk.1.post_ffw_norm.weight"},
                                     std::pair{SynthArch::kGranite, "blk.0.ffn_norm.weight"}}) {
    const auto m = synth_variant(arch, tensor);
    const std::string e = load_error(*m->file);
    EXPECT_NE(e.find(tensor), std::string::npos) << e;
    EXPECT_NE(e.find("missing"), std::string::npos) << e;
  }
}

TEST(ModelWeights, AnUnusedBiasIsRefusedRatherThanIgnored) {
  const auto m = synth_variant(SynthArch::kGranite, "", {}, "blk.0.attn_output.bias");
  const std::string e = load_error(*m->file);
  EXPECT_NE(e.find("blk.0.attn_output.bias"), std::string::npos) << e;
  EXPECT_NE(e.find("granite"), std::string::npos) << e;
}

}  // namespace
}  // namespace tokenmill::model
