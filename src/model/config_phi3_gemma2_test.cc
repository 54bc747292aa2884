// phi3 and gemma2 on synthetic files: the keys each reads (with llama.cpp's
// defaults where a file leaves them out), the fused phi3 tensors bound as
// row views that compute exactly what separate tensors do, and the errors
// that name a missing or unsupported key or tensor.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gguf/reader.h"
#include "gguf/writer.h"
#include "model/config.h"
#include "model/model.h"
#include "model/single_sequence.h"
#include "model/synth.h"
#include "model/test_gguf_variants.h"
#include "model/weights.h"
#include "util/error.h"

namespace tokenmill::model {
namespace {

using gguf::Value;

using test_files::adding;
using test_files::dropping;
using test_files::Edit;
using test_files::load_error;
using test_files::setting;
using test_files::variant;

ShapeOverrides layers(int64_t n_layer, std::optional<int64_t> head_dim = {}) {
  ShapeOverrides o;
  o.n_layer = n_layer;
  o.head_dim = head_dim;
  return o;
}

TEST(Phi3Config, NeoxRopeAndTheStatedWindowIsNotApplied) {
  const auto m = variant(SynthArch::kPhi3);
  EXPECT_EQ(m->file->get_int("phi3.attention.sliding_window"), 8);
  const ModelConfig c = ModelConfig::from_gguf(*m->file);
  EXPECT_EQ(c.arch, Arch::Phi3);
  EXPECT_TRUE(c.rope_neox);
  EXPECT_FALSE(c.ffn_gelu);
  EXPECT_EQ(c.sliding_window, 0);  // as llama.cpp, which switches phi3's window off
  for (bool local : c.layer_is_local) EXPECT_FALSE(local);
  EXPECT_EQ(c.attn_softcap, 0.0f);
  EXPECT_EQ(c.final_softcap, 0.0f);
  EXPECT_FLOAT_EQ(c.attn_scale, 1.0f / std::sqrt(16.0f));
}

// q, k, v and gate, up are row ranges of the fused tensors: pointers into
// the same bytes, one quantized row (34 bytes per 32 Q8_0 values) per row.
TEST(Phi3Weights, FusedTensorsAreBoundAsRowViews) {
  const auto m = variant(SynthArch::kPhi3, {}, "Q8_0");
  const ModelConfig c = ModelConfig::from_gguf(*m->file);
  const ModelWeights w = ModelWeights::bind(*m->file, c);
  const int64_t row = gguf::row_bytes(gguf::TensorType::Q8_0, c.n_embd);
  EXPECT_EQ(row, 2 * 34);
  for (int64_t i = 0; i < c.n_layer; ++i) {
    const LayerWeights& l = w.layers[static_cast<size_t>(i)];
    const std::string p = "blk." + std::to_string(i) + ".";
    const uint8_t* qkv = m->file->tensor(p + "attn_qkv.weight").data;
    const uint8_t* up = m->file->tensor(p + "ffn_up.weight").data;
    EXPECT_EQ(l.wq.data, qkv);
    EXPECT_EQ(l.wk.data, qkv + c.n_q_dim() * row);
    EXPECT_EQ(l.wv.data, qkv + (c.n_q_dim() + c.n_kv_dim()) * row);
    EXPECT_EQ(l.wq.rows, c.n_q_dim());
    EXPECT_EQ(l.wk.rows, c.n_kv_dim());
    EXPECT_EQ(l.wv.rows, c.n_kv_dim());
    EXPECT_EQ(l.w_gate.data, up);
    EXPECT_EQ(l.w_up.data, up + c.n_ff * row);
    EXPECT_EQ(l.w_gate.rows, c.n_ff);
    EXPECT_EQ(l.w_up.rows, c.n_ff);
    EXPECT_EQ(l.w_up.type, gguf::TensorType::Q8_0);
    EXPECT_EQ(l.w_up.cols, c.n_embd);
  }
}

// The phi3 file with its fused tensors cut into attn_q/attn_k/attn_v and
// ffn_gate/ffn_up (the layout older phi3 files use).
std::vector<uint8_t> split_phi3(const gguf::GgufFile& f, const ModelConfig& c) {
  gguf::GgufWriter w;
  for (const gguf::MetadataEntry& e : f.metadata()) w.set(e.key, e.value);
  for (const gguf::TensorInfo& t : f.tensors()) {
    const std::string name(t.name);
    const int64_t row = gguf::row_bytes(t.type, t.dims[0]);
    auto part = [&](const std::string& to, int64_t first, int64_t rows) {
      const uint8_t* begin = t.data + first * row;
      w.add_tensor(to, t.type, {t.dims[0], rows}, std::vector<uint8_t>(begin, begin + rows * row));
    };
    const size_t dot = name.find(".attn_qkv.");
    if (dot != std::string::npos) {
      const std::string p = name.substr(0, dot + 1);
      part(p + "attn_q.weight", 0, c.n_q_dim());
      part(p + "attn_k.weight", c.n_q_dim(), c.n_kv_dim());
      part(p + "attn_v.weight", c.n_q_dim() + c.n_kv_dim(), c.n_kv_dim());
    } else if (name.find(".ffn_up.") != std::string::npos) {
      const std::string p = name.substr(0, name.find(".ffn_up.") + 1);
      part(p + "ffn_gate.weight", 0, c.n_ff);
      part(p + "ffn_up.weight", c.n_ff, c.n_ff);
    } else {
      w.add_tensor(name, t.type, std::vector<int64_t>(t.dims, t.dims + t.num_dims),
                   std::vector<uint8_t>(t.data, t.data + t.num_bytes));
    }
  }
  return w.to_bytes();
}

std::vector<float> all_logits(const std::string& path, const std::vector<int32_t>& tokens) {
  const std::unique_ptr<Model> m = Model::load(path);
  ThreadPool pool(1);
  SingleSequence seq(*m, static_cast<int64_t>(tokens.size()), kv::KvDtype::F32);
  std::vector<float> logits;
  seq.forward(tokens, /*all_logits=*/true, logits, pool);
  return logits;
}

TEST(Phi3Weights, FusedAndSeparateLayoutsGiveTheSameLogits) {
  const auto m = variant(SynthArch::kPhi3, {}, "Q8_0");
  const ModelConfig c = ModelConfig::from_gguf(*m->file);
  const auto dir = std::filesystem::temp_directory_path();
  const std::string fused = (dir / ("tm_phi3_fused_" + std::to_string(::getpid()) + ".gguf")).string();
  const std::string split = (dir / ("tm_phi3_split_" + std::to_string(::getpid()) + ".gguf")).string();
  auto write = [](const std::string& path, const std::vector<uint8_t>& bytes) {
    std::FILE* out = std::fopen(path.c_str(), "wb");
    ASSERT_NE(out, nullptr);
    EXPECT_EQ(std::fwrite(bytes.data(), 1, bytes.size(), out), bytes.size());
    std::fclose(out);
  };
  write(fused, m->bytes);
  write(split, split_phi3(*m->file, c));
  {
    const gguf::GgufFile s = gguf::GgufFile::open(split);
    EXPECT_EQ(s.find_tensor("blk.0.attn_qkv.weight"), nullptr);
    EXPECT_NE(s.find_tensor("blk.0.ffn_gate.weight"), nullptr);
  }
  const std::vector<int32_t> tokens = {1, 17, 300, 42, 5, 99, 511, 7, 8, 9, 10, 200};
  const std::vector<float> a = all_logits(fused, tokens);
  const std::vector<float> b = all_logits(split, tokens);
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)));  // the same bytes, the same kernels
  std::filesystem::remove(fused);
  std::filesystem::remove(split);
}

TEST(Phi3Weights, MissingOrMisshapenTensorsAreNamed) {
  struct Case {
    std::string drop, want;
  };
  for (const Case& k :
       {Case{"blk.1.attn_qkv.weight", "blk.1.attn_qkv.weight"}, Case{"blk.0.ffn_up.weight", "blk.0.ffn_up.weight"},
        Case{"blk.1.attn_output.weight", "blk.1.attn_output.weight"}}) {
    const auto m = variant(SynthArch::kPhi3, dropping(k.drop));
    const std::string e = load_error(*m->file);
    EXPECT_NE(e.find(k.want), std::string::npos) << e;
    EXPECT_NE(e.find("missing"), std::string::npos) << e;
    EXPECT_NE(e.find("phi3.gguf"), std::string::npos) << e;
  }
  // An ffn_up of n_ff rows with no ffn_gate: the gate is what is missing.
  ShapeOverrides wide_ffn;
  wide_ffn.n_ff = 256;
  const auto llama_ffn = variant(SynthArch::kPhi3, {}, "F32", wide_ffn);
  const ModelConfig c = ModelConfig::from_gguf(*llama_ffn->file);
  gguf::GgufWriter w;
  for (const gguf::MetadataEntry& e : llama_ffn->file->metadata()) w.set(e.key, e.value);
  w.set("phi3.feed_forward_length", Value::u32(static_cast<uint32_t>(2 * c.n_ff)));
  for (const gguf::TensorInfo& t : llama_ffn->file->tensors()) {
    if (std::string(t.name).find("ffn_down") != std::string::npos) continue;  // its shape would be named first
    w.add_tensor(t.name, t.type, std::vector<int64_t>(t.dims, t.dims + t.num_dims),
                 std::vector<uint8_t>(t.data, t.data + t.num_bytes));
  }
  const std::vector<uint8_t> bytes = w.to_bytes();
  const std::string e = load_error(gguf::GgufFile::parse(bytes, "halves.gguf"));
  EXPECT_NE(e.find("blk.0.ffn_gate.weight"), std::string::npos) << e;
}

TEST(Phi3Weights, AnOutputBiasIsRefusedRatherThanIgnored) {
  const auto m = variant(SynthArch::kPhi3, adding("output.bias"));
  const std::string e = load_error(*m->file);
  EXPECT_NE(e.find("output.bias"), std::string::npos) << e;
}

// LongRoPE needs both factor tables: a file with only one is refused,
// naming the tensor (both tables: see rope_config_test.cc).
TEST(Phi3Config, OneLongRopeFactorTableAloneIsRefusedNamingTheTensor) {
  for (const char* name : {"rope_factors_long.weight", "rope_factors_short.weight"}) {
    const auto m = variant(SynthArch::kPhi3, adding(name));
    const std::string e = load_error(*m->file);
    EXPECT_NE(e.find(name), std::string::npos) << e;
    EXPECT_NE(e.find("LongRoPE"), std::string::npos) << e;
  }
}

TEST(Gemma2Config, SoftcapsWindowOnEvenLayersAndGemmaTraits) {
  const auto m = variant(SynthArch::kGemma2, {}, "F32", layers(5));
  const ModelConfig c = ModelConfig::from_gguf(*m->file);
  EXPECT_EQ(c.arch, Arch::Gemma2);
  EXPECT_TRUE(c.rope_neox);
  EXPECT_TRUE(c.ffn_gelu);
  EXPECT_TRUE(c.post_norms);
  EXPECT_EQ(c.qk_norm, ModelConfig::QkNorm::kNone);
  EXPECT_FLOAT_EQ(c.embd_scale, 8.0f);  // sqrt(64)
  EXPECT_FLOAT_EQ(c.attn_softcap, 4.0f);
  EXPECT_FLOAT_EQ(c.final_softcap, 8.0f);
  EXPECT_FLOAT_EQ(c.attn_scale, 1.0f / std::sqrt(16.0f));
  EXPECT_EQ(c.sliding_window, 8);
  EXPECT_EQ(c.layer_is_local, (std::vector<bool>{true, false, true, false, true}));
  EXPECT_FLOAT_EQ(c.rope_base, 10000.0f);
  EXPECT_FLOAT_EQ(c.rope_base_local, c.rope_base);
  const ModelWeights w = ModelWeights::bind(*m->file, c);
  EXPECT_EQ(w.output.data, w.tok_embd.data);  // tied
  EXPECT_FALSE(w.layers[0].q_norm.present());
  EXPECT_TRUE(w.layers[4].post_attn_norm.present());
  EXPECT_TRUE(w.layers[4].post_ffn_norm.present());
}

TEST(Gemma2Config, AbsentKeysTakeTheReleasedModelsValues) {
  for (const char* key :
       {"gemma2.attn_logit_softcapping", "gemma2.final_logit_softcapping", "gemma2.attention.sliding_window"}) {
    const auto m = variant(SynthArch::kGemma2, dropping(key));
    const ModelConfig c = ModelConfig::from_gguf(*m->file);
    EXPECT_FLOAT_EQ(c.attn_softcap, std::string(key) == "gemma2.attn_logit_softcapping" ? 50.0f : 4.0f) << key;
    EXPECT_FLOAT_EQ(c.final_softcap, std::string(key) == "gemma2.final_logit_softcapping" ? 30.0f : 8.0f) << key;
    EXPECT_EQ(c.sliding_window, std::string(key) == "gemma2.attention.sliding_window" ? 4096 : 8) << key;
  }
}

// Gemma 2 27B (46 layers) scales queries by 1/sqrt(n_embd / n_head), as
// llama.cpp does; the other sizes by 1/sqrt(head_dim).
TEST(Gemma2Config, The27bLayerCountScalesByEmbeddingPerHead) {
  const auto m = variant(SynthArch::kGemma2, {}, "F32", layers(46, 32));
  const ModelConfig c = ModelConfig::from_gguf(*m->file);
  EXPECT_EQ(c.head_dim, 32);
  EXPECT_FLOAT_EQ(c.attn_scale, 1.0f / std::sqrt(16.0f));  // n_embd 64 / 4 heads
  const auto small = variant(SynthArch::kGemma2, {}, "F32", layers(4, 32));
  EXPECT_FLOAT_EQ(ModelConfig::from_gguf(*small->file).attn_scale, 1.0f / std::sqrt(32.0f));
}

// Gemma 3 27B (62 layers) likewise, as llama.cpp does.
TEST(Gemma3Config, The27bLayerCountScalesByEmbeddingPerHead) {
  const auto m = variant(SynthArch::kGemma3, {}, "F32", layers(62, 32));
  EXPECT_FLOAT_EQ(ModelConfig::from_gguf(*m->file).attn_scale, 1.0f / std::sqrt(16.0f));
  const auto small = variant(SynthArch::kGemma3, {}, "F32", layers(6, 32));
  EXPECT_FLOAT_EQ(ModelConfig::from_gguf(*small->file).attn_scale, 1.0f / std::sqrt(32.0f));
}

TEST(Gemma2Config, BadSoftcapsAndMissingNormsAreNamed) {
  for (const auto& [key, value] :
       {std::pair{"gemma2.attn_logit_softcapping", 0.0f}, std::pair{"gemma2.final_logit_softcapping", -30.0f},
        std::pair{"gemma2.attn_logit_softcapping", NAN}}) {
    const auto m = variant(SynthArch::kGemma2, setting(key, Value::f32(value)));
    const std::string e = load_error(*m->file);
    EXPECT_NE(e.find(key), std::string::npos) << e;
    EXPECT_NE(e.find("positive"), std::string::npos) << e;
  }
  for (const char* tensor : {"blk.1.post_attention_norm.weight", "blk.0.post_ffw_norm.weight"}) {
    const auto m = variant(SynthArch::kGemma2, dropping(tensor));
    const std::string e = load_error(*m->file);
    EXPECT_NE(e.find(tensor), std::string::npos) << e;
    EXPECT_NE(e.find("missing"), std::string::npos) << e;
  }
}

}  // namespace
}  // namespace tokenmill::model
