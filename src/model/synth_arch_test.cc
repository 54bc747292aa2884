// Synthetic qwen3, olmo2 and granite files: each architecture's tensor
// layout and keys, its realistic preset, and the byte-level BPE vocabulary
// their released models ship (checked by tokenizing with tokenmill's own
// tokenizer; tests/python/test_arch_reference.py checks it against
// llama.cpp's).
#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "gguf/reader.h"
#include "model/synth.h"
#include "model/synth_vocab.h"
#include "model/test_gguf_variants.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace tokenmill::model {
namespace {

using gguf::TensorType;

using Built = test_files::ParsedGguf;

std::unique_ptr<Built> build_tiny(SynthArch arch, std::optional<int64_t> head_dim = {}) {
  SynthOptions o;
  o.arch = arch;
  o.overrides.head_dim = head_dim;
  o.num_threads = 1;
  return test_files::parse_gguf(build_synth_model(o, nullptr).to_bytes(), "synth");
}

TEST(SynthArchTest, Qwen3HasPerHeadQkNormsAndNoBiases) {
  auto b = build_tiny(SynthArch::kQwen3, 32);
  const gguf::GgufFile& f = *b->file;
  EXPECT_EQ(f.get_int("qwen3.attention.key_length"), 32);
  EXPECT_FLOAT_EQ(f.get_float("qwen3.rope.freq_base"), 1e6f);
  EXPECT_EQ(f.tensor("blk.1.attn_q.weight").dims[1], 4 * 32);
  EXPECT_EQ(f.tensor("blk.1.attn_q_norm.weight").dims[0], 32);
  EXPECT_EQ(f.tensor("blk.1.attn_k_norm.weight").dims[0], 32);
  EXPECT_EQ(f.find_tensor("blk.0.attn_q.bias"), nullptr);
  EXPECT_EQ(f.find_tensor("blk.0.post_attention_norm.weight"), nullptr);
  // With the head size n_embd / n_head, the key is still written (as Qwen 3 files do).
  auto plain = build_tiny(SynthArch::kQwen3);
  EXPECT_EQ(plain->file->get_int("qwen3.attention.key_length"), 16);
}

TEST(SynthArchTest, Olmo2HasPostNormsOnlyAndFullWidthQkNorms) {
  auto b = build_tiny(SynthArch::kOlmo2);
  const gguf::GgufFile& f = *b->file;
  EXPECT_FLOAT_EQ(f.get_float("olmo2.rope.freq_base"), 5e5f);
  for (const char* n : {"attn_norm", "ffn_norm"})
    EXPECT_EQ(f.find_tensor(std::string("blk.0.") + n + ".weight"), nullptr);
  EXPECT_EQ(f.tensor("blk.1.attn_q_norm.weight").dims[0], 4 * 16);
  EXPECT_EQ(f.tensor("blk.1.attn_k_norm.weight").dims[0], 2 * 16);
  EXPECT_EQ(f.tensor("blk.1.post_attention_norm.weight").dims[0], 64);
  EXPECT_EQ(f.tensor("blk.1.post_ffw_norm.weight").dims[0], 64);
  EXPECT_EQ(f.tensors().size(), 3u + 2 * 11);
}

TEST(SynthArchTest, GraniteIsTheLlamaLayoutWithMultipliers) {
  auto b = build_tiny(SynthArch::kGranite);
  const gguf::GgufFile& f = *b->file;
  EXPECT_FLOAT_EQ(f.get_float("granite.embedding_scale"), 12.0f);
  EXPECT_FLOAT_EQ(f.get_float("granite.residual_scale"), 0.22f);
  EXPECT_FLOAT_EQ(f.get_float("granite.attention.scale"), 0.015625f);
  EXPECT_FLOAT_EQ(f.get_float("granite.logit_scale"), 8.0f);
  EXPECT_FLOAT_EQ(f.get_float("granite.rope.freq_base"), 10000.0f);
  EXPECT_EQ(f.tensors().size(), 3u + 2 * 9);  // llama's tensors, nothing else
}

TEST(SynthArchTest, RealisticPresetsHaveTheReleasedShapes) {
  const SynthShape q = resolve_synth_shape(SynthArch::kQwen3, "qwen3-0.6b", {});
  EXPECT_EQ(q.head_dim, 128);  // 16 heads of 128 on n_embd 1024
  EXPECT_EQ(q.vocab, 151936);
  const auto plan = plan_synth_tensors(SynthArch::kQwen3, q, {}, TensorType::F16, nullptr);
  int64_t params = 0;
  for (const SynthTensor& t : plan) params += t.dims.size() == 2 ? t.dims[0] * t.dims[1] : t.dims[0];
  EXPECT_NEAR(static_cast<double>(params) / 1e9, 0.75, 0.01);  // 0.6B + its untied 0.16B classifier
  const SynthShape o = resolve_synth_shape(SynthArch::kOlmo2, "olmo2-1b", {});
  EXPECT_EQ(o.n_layer, 16);
  EXPECT_EQ(o.vocab, 100352);
  const SynthShape g = resolve_synth_shape(SynthArch::kGranite, "granite3-2b", {});
  EXPECT_EQ(g.n_layer, 40);
  EXPECT_EQ(g.n_kv_head, 8);
}

TEST(SynthArchTest, BuiltinBpeVocabIsExactUniqueAndMergeClosed) {
  const std::vector<std::string> specials = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};
  for (int64_t size : {259, 512, 151936}) {
    const BpeVocab v = builtin_bpe_vocab(size, specials);
    ASSERT_EQ(static_cast<int64_t>(v.tokens.size()), size);
    ASSERT_EQ(v.types.size(), v.tokens.size());
    const std::set<std::string> unique(v.tokens.begin(), v.tokens.end());
    EXPECT_EQ(static_cast<int64_t>(unique.size()), size);
    EXPECT_EQ(v.tokens[32], "\xC4\xA0");  // the space byte is "Ġ" (U+0120)
    EXPECT_EQ(v.tokens['a'], "a");
    EXPECT_EQ(v.eos_id, size - 3);
    EXPECT_EQ(v.tokens[static_cast<size_t>(v.eos_id)], "<|endoftext|>");
    EXPECT_EQ(v.types.back(), kTokenControl);
    EXPECT_EQ(static_cast<int64_t>(v.merges.size()), size - 256 - 3);
    for (const std::string& m : v.merges) {
      const size_t space = m.find(' ');
      ASSERT_NE(space, std::string::npos) << m;
      const std::string left = m.substr(0, space), right = m.substr(space + 1);
      ASSERT_TRUE(unique.contains(left) && unique.contains(right) && unique.contains(left + right)) << m;
    }
  }
  EXPECT_THROW(builtin_bpe_vocab(258, specials), Error);
}

TEST(SynthArchTest, EachArchitectureShipsItsTokenizerAndItRoundTrips) {
  const struct {
    SynthArch arch;
    const char* pre;
  } cases[] = {{SynthArch::kQwen3, "qwen2"}, {SynthArch::kOlmo2, "dbrx"}, {SynthArch::kGranite, "refact"}};
  const std::string text = "Once upon a time, Lily saw 12345 big trees.\n\tHello  world! caf\xC3\xA9";
  for (const auto& c : cases) {
    auto b = build_tiny(c.arch);
    const gguf::GgufFile& f = *b->file;
    EXPECT_EQ(f.get_string("tokenizer.ggml.model"), "gpt2");
    EXPECT_EQ(f.get_string("tokenizer.ggml.pre"), c.pre);
    const tokenizer::Tokenizer tok = tokenizer::Tokenizer::from_gguf(f);
    const std::vector<int32_t> ids = tok.encode(text, false, false);
    EXPECT_LT(ids.size(), text.size()) << "the merges shorten the text";
    EXPECT_EQ(tok.decode(ids, false), text);
    // The first control token follows the byte symbols and the merged tokens.
    EXPECT_EQ(tok.eos_id(), 256 + static_cast<int32_t>(f.get_array("tokenizer.ggml.merges").items.size()));
  }
  // llama keeps its SentencePiece vocabulary.
  auto llama = build_tiny(SynthArch::kLlama);
  EXPECT_EQ(llama->file->get_string("tokenizer.ggml.model"), "llama");
}

}  // namespace
}  // namespace tokenmill::model
