#include "model/synth.h"
#include "model/test_gguf_variants.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>

#include "gguf/reader.h"
#include "kernels/quant.h"
#include "model/synth_vocab.h"
#include "util/error.h"
#include "util/test_dependency.h"

namespace tokenmill::model {
namespace {

using gguf::TensorType;

using testing::shared_dir;

SynthOptions tiny(SynthArch arch = SynthArch::kLlama, const std::string& type = "F32", uint64_t seed = 1) {
  SynthOptions o;
  o.arch = arch;
  o.preset = "tiny";
  o.format = *parse_weight_format(type);
  o.seed = seed;
  o.num_threads = 2;
  return o;
}

using Built = test_files::ParsedGguf;

std::unique_ptr<Built> build(const SynthOptions& o, std::vector<std::string>* notes = nullptr) {
  return test_files::parse_gguf(build_synth_model(o, notes).to_bytes(), "synth");
}

int64_t count_params(const std::vector<SynthTensor>& plan) {
  int64_t n = 0;
  for (const SynthTensor& t : plan) {
    int64_t e = 1;
    for (int64_t d : t.dims) e *= d;
    n += e;
  }
  return n;
}

const SynthTensor& find(const std::vector<SynthTensor>& plan, const std::string& name) {
  for (const SynthTensor& t : plan) {
    if (t.name == name) return t;
  }
  ADD_FAILURE() << "no tensor " << name;
  return plan.front();
}

TEST(SynthTest, SameSeedSameBytesAnyThreadCount) {
  SynthOptions a = tiny(SynthArch::kLlama, "Q8_0", 42);
  SynthOptions b = a;
  b.num_threads = 1;
  EXPECT_EQ(build_synth_model(a, nullptr).to_bytes(), build_synth_model(b, nullptr).to_bytes());
  SynthOptions c = a;
  c.seed = 43;
  EXPECT_NE(build_synth_model(a, nullptr).to_bytes(), build_synth_model(c, nullptr).to_bytes());
}

TEST(SynthTest, WrittenFilesAreByteIdentical) {
  const auto dir = std::filesystem::temp_directory_path();
  const std::string a = (dir / ("tm_synth_a_" + std::to_string(::getpid()) + ".gguf")).string();
  const std::string b = (dir / ("tm_synth_b_" + std::to_string(::getpid()) + ".gguf")).string();
  const SynthOptions o = tiny(SynthArch::kGemma3, "Q4_K_M", 9);
  write_synth_model(o, a);
  write_synth_model(o, b);
  auto read = [](const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::vector<char>((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  };
  const std::vector<char> bytes = read(a);
  EXPECT_GT(bytes.size(), 1000u);
  EXPECT_EQ(bytes, read(b));
  std::filesystem::remove(a);
  std::filesystem::remove(b);
}

TEST(SynthTest, TinyIsSmallForEveryTypeAndArch) {
  const char* types[] = {"F32",  "F16",  "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0",
                         "Q5_1", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "Q4_K_M"};
  for (SynthArch arch : {SynthArch::kLlama, SynthArch::kQwen2, SynthArch::kGemma3}) {
    for (const char* type : types) {
      const size_t size = build_synth_model(tiny(arch, type), nullptr).to_bytes().size();
      EXPECT_LT(size, 5u << 20) << synth_arch_name(arch) << " " << type;
      EXPECT_GT(size, 20000u) << synth_arch_name(arch) << " " << type;
    }
  }
}

// Parameter counts of the published models: LLaMA-7B 6,738,415,616 and
// TinyLlama-1.1B 1,100,048,384.
TEST(SynthTest, LargePresetShapesMatchThePublishedModels) {
  const SynthShape l7 = resolve_synth_shape(SynthArch::kLlama, "llama-7b", {});
  EXPECT_EQ(l7.head_dim, 128);
  EXPECT_EQ(l7.ctx, 4096);
  const auto plan7 = plan_synth_tensors(SynthArch::kLlama, l7, {}, TensorType::F16, nullptr);
  EXPECT_EQ(plan7.size(), 3u + 32 * 9);
  EXPECT_EQ(count_params(plan7), 6738415616);

  const SynthShape tl = resolve_synth_shape(SynthArch::kLlama, "tinyllama-1.1b", {});
  EXPECT_EQ(tl.n_kv_head, 4);
  EXPECT_EQ(tl.vocab, 32000);
  const auto plan = plan_synth_tensors(SynthArch::kLlama, tl, {}, TensorType::F16, nullptr);
  EXPECT_EQ(count_params(plan), 1100048384);
  EXPECT_EQ(find(plan, "blk.21.attn_k.weight").dims, (std::vector<int64_t>{2048, 256}));
  EXPECT_EQ(find(plan, "blk.0.ffn_down.weight").dims, (std::vector<int64_t>{5632, 2048}));
}

TEST(SynthTest, Q4KMPolicyOnTinyllama) {
  const SynthShape s = resolve_synth_shape(SynthArch::kLlama, "tinyllama-1.1b", {});
  std::vector<std::string> notes;
  const auto plan = plan_synth_tensors(SynthArch::kLlama, s, *parse_weight_format("q4_k_m"), TensorType::F16, &notes);
  EXPECT_TRUE(notes.empty());  // 2048 and 5632 are multiples of 256
  EXPECT_EQ(find(plan, "output.weight").type, TensorType::Q6_K);
  EXPECT_EQ(find(plan, "token_embd.weight").type, TensorType::Q4_K);
  EXPECT_EQ(find(plan, "output_norm.weight").type, TensorType::F32);
  // 22 layers: first 22/8 = 2, from 7*22/8 = 19 on, and (i - 2) % 3 == 2.
  const std::set<int> more = {0, 1, 4, 7, 10, 13, 16, 19, 20, 21};
  for (int i = 0; i < 22; ++i) {
    const TensorType want = more.count(i) ? TensorType::Q6_K : TensorType::Q4_K;
    EXPECT_EQ(find(plan, "blk." + std::to_string(i) + ".attn_v.weight").type, want) << i;
    EXPECT_EQ(find(plan, "blk." + std::to_string(i) + ".ffn_down.weight").type, want) << i;
    EXPECT_EQ(find(plan, "blk." + std::to_string(i) + ".attn_q.weight").type, TensorType::Q4_K);
  }
}

TEST(SynthTest, Q4KMTiedEmbeddingGetsQ6K) {
  ShapeOverrides o;
  o.n_embd = 256;
  o.n_ff = 512;
  const SynthShape s = resolve_synth_shape(SynthArch::kGemma3, "tiny", o);
  EXPECT_TRUE(s.tied_output);
  const auto plan = plan_synth_tensors(SynthArch::kGemma3, s, *parse_weight_format("Q4_K_M"), TensorType::F16, nullptr);
  EXPECT_EQ(find(plan, "token_embd.weight").type, TensorType::Q6_K);
  for (const SynthTensor& t : plan) EXPECT_NE(t.name, "output.weight");
}

TEST(SynthTest, RowsThatDoNotFitFallBackPerTensor) {
  ShapeOverrides o;
  o.n_ff = 100;  // ffn_down rows of 100: neither 256 nor 32 divides it
  const SynthShape s = resolve_synth_shape(SynthArch::kLlama, "tiny", o);
  std::vector<std::string> notes;
  const auto plan = plan_synth_tensors(SynthArch::kLlama, s, *parse_weight_format("Q4_K"), TensorType::F16, &notes);
  EXPECT_EQ(find(plan, "blk.0.attn_q.weight").type, TensorType::Q8_0);   // rows of 64
  EXPECT_EQ(find(plan, "blk.1.ffn_down.weight").type, TensorType::F16);  // rows of 100
  EXPECT_EQ(find(plan, "blk.1.ffn_up.weight").type, TensorType::Q8_0);
  EXPECT_EQ(notes.size(), 2u + 2 * 7);  // every matrix of the model
  EXPECT_NE(notes[0].find("token_embd.weight"), std::string::npos);
  EXPECT_NE(notes[0].find("Q8_0"), std::string::npos);

  ShapeOverrides wide;
  wide.n_embd = 256;
  wide.n_ff = 512;
  notes.clear();
  const SynthShape w = resolve_synth_shape(SynthArch::kLlama, "tiny", wide);
  const auto fits = plan_synth_tensors(SynthArch::kLlama, w, *parse_weight_format("Q4_K"), TensorType::F16, &notes);
  EXPECT_TRUE(notes.empty());
  EXPECT_EQ(find(fits, "blk.0.ffn_down.weight").type, TensorType::Q4_K);
}

TEST(SynthTest, FileHasEveryPlannedTensorAndTheLlamaKeys) {
  std::vector<std::string> notes;
  SynthOptions o = tiny(SynthArch::kLlama, "Q4_K", 5);
  auto b = build(o, &notes);
  const gguf::GgufFile& f = *b->file;
  const auto plan = plan_synth_tensors(SynthArch::kLlama, resolve_synth_shape(o.arch, "tiny", {}), o.format,
                                       TensorType::F16, nullptr);
  ASSERT_EQ(f.tensors().size(), plan.size());
  for (const SynthTensor& t : plan) {
    const gguf::TensorInfo& info = f.tensor(t.name);
    EXPECT_EQ(info.type, t.type) << t.name;
    for (size_t d = 0; d < t.dims.size(); ++d) EXPECT_EQ(info.dims[d], t.dims[d]) << t.name;
  }
  EXPECT_EQ(f.tensor("output.weight").dims[1], 512);
  EXPECT_EQ(f.get_string("general.architecture"), "llama");
  EXPECT_EQ(f.get_string("general.name"), "synthetic tiny");
  EXPECT_EQ(f.get_int("general.file_type"), 14);
  EXPECT_EQ(f.get_int("tokenmill.synth.seed"), 5);
  EXPECT_EQ(f.get_int("llama.embedding_length"), 64);
  EXPECT_EQ(f.get_int("llama.block_count"), 2);
  EXPECT_EQ(f.get_int("llama.attention.head_count"), 4);
  EXPECT_EQ(f.get_int("llama.attention.head_count_kv"), 2);
  EXPECT_EQ(f.get_int("llama.feed_forward_length"), 128);
  EXPECT_EQ(f.get_int("llama.rope.dimension_count"), 16);
  EXPECT_FLOAT_EQ(f.get_float("llama.rope.freq_base"), 10000.0f);
  EXPECT_FLOAT_EQ(f.get_float("llama.attention.layer_norm_rms_epsilon"), 1e-5f);
  EXPECT_EQ(f.get_string("tokenizer.ggml.model"), "llama");
  EXPECT_EQ(f.get_array("tokenizer.ggml.tokens").items.size(), 512u);
  EXPECT_FALSE(f.has("llama.attention.key_length"));
}

TEST(SynthTest, Qwen2HasBiasesAndItsOwnKeys) {
  auto b = build(tiny(SynthArch::kQwen2));
  const gguf::GgufFile& f = *b->file;
  EXPECT_EQ(f.get_string("general.architecture"), "qwen2");
  EXPECT_FLOAT_EQ(f.get_float("qwen2.rope.freq_base"), 1e6f);
  EXPECT_FLOAT_EQ(f.get_float("qwen2.attention.layer_norm_rms_epsilon"), 1e-6f);
  EXPECT_EQ(f.tensor("blk.1.attn_q.bias").dims[0], 64);
  EXPECT_EQ(f.tensor("blk.1.attn_k.bias").dims[0], 32);
  EXPECT_EQ(f.tensor("blk.1.attn_v.bias").type, TensorType::F32);
  EXPECT_EQ(f.tensors().size(), 3u + 2 * 12);
}

TEST(SynthTest, Gemma3LayoutAndKeys) {
  ShapeOverrides o;
  o.head_dim = 32;  // decoupled from n_embd / n_head = 16, as in real Gemma 3
  SynthOptions opts = tiny(SynthArch::kGemma3);
  opts.overrides = o;
  auto b = build(opts);
  const gguf::GgufFile& f = *b->file;
  EXPECT_EQ(f.get_int("gemma3.attention.key_length"), 32);
  EXPECT_EQ(f.get_int("gemma3.attention.value_length"), 32);
  EXPECT_EQ(f.get_int("gemma3.attention.sliding_window"), 8);
  EXPECT_FLOAT_EQ(f.get_float("gemma3.rope.freq_base"), 1e6f);
  EXPECT_FLOAT_EQ(f.get_float("gemma3.attention.layer_norm_rms_epsilon"), 1e-6f);
  EXPECT_EQ(f.find_tensor("output.weight"), nullptr);
  EXPECT_EQ(f.tensor("blk.0.attn_q.weight").dims[1], 4 * 32);
  EXPECT_EQ(f.tensor("blk.0.attn_k.weight").dims[1], 2 * 32);
  EXPECT_EQ(f.tensor("blk.0.attn_output.weight").dims[0], 4 * 32);
  EXPECT_EQ(f.tensor("blk.1.attn_q_norm.weight").dims[0], 32);
  EXPECT_EQ(f.tensor("blk.1.attn_k_norm.weight").dims[0], 32);
  for (const char* n : {"post_attention_norm", "post_ffw_norm", "ffn_norm", "attn_norm"}) {
    EXPECT_EQ(f.tensor(std::string("blk.1.") + n + ".weight").dims[0], 64) << n;
  }
  EXPECT_EQ(f.tensors().size(), 2u + 2 * 13);
}

// Phi-3 fuses q/k/v into attn_qkv and gate/up into ffn_up, states a window
// and keeps its own output matrix; Q4_K_M stores attn_qkv as Q5_K.
TEST(SynthTest, Phi3FusedLayoutAndKeys) {
  auto b = build(tiny(SynthArch::kPhi3));
  const gguf::GgufFile& f = *b->file;
  EXPECT_EQ(f.tensor("blk.1.attn_qkv.weight").dims[1], 4 * 16 + 2 * 2 * 16);
  EXPECT_EQ(f.tensor("blk.1.ffn_up.weight").dims[1], 2 * 128);
  for (const char* n : {"attn_q", "attn_k", "attn_v", "ffn_gate"}) {
    EXPECT_EQ(f.find_tensor(std::string("blk.0.") + n + ".weight"), nullptr) << n;
  }
  EXPECT_NE(f.find_tensor("output.weight"), nullptr);
  EXPECT_EQ(f.get_int("phi3.attention.sliding_window"), 8);
  EXPECT_FLOAT_EQ(f.get_float("phi3.rope.freq_base"), 10000.0f);
  EXPECT_EQ(f.tensors().size(), 3u + 2 * 6);
  // Phi-3's 64 added tokens end the table: chat tokens, then placeholders.
  const auto& tokens = f.find("tokenizer.ggml.tokens")->as_array().items;
  ASSERT_EQ(tokens.size(), 512u);
  EXPECT_EQ(tokens[448].as_string(), "<|endoftext|>");
  EXPECT_EQ(tokens[455].as_string(), "<|end|>");
  EXPECT_EQ(tokens[458].as_string(), "<|user|>");
  EXPECT_EQ(tokens[511].as_string(), "<|placeholder59|>");
  EXPECT_EQ(f.get_int("tokenizer.ggml.eos_token_id"), 448);
  EXPECT_EQ(f.get_int("tokenizer.ggml.eot_token_id"), 455);
  ShapeOverrides o;
  o.n_embd = 256;
  o.n_ff = 512;
  const SynthShape wide = resolve_synth_shape(SynthArch::kPhi3, "tiny", o);
  const auto plan =
      plan_synth_tensors(SynthArch::kPhi3, wide, *parse_weight_format("Q4_K_M"), TensorType::F16, nullptr);
  EXPECT_EQ(find(plan, "blk.0.attn_qkv.weight").type, TensorType::Q5_K);
  EXPECT_EQ(find(plan, "blk.0.ffn_up.weight").type, TensorType::Q4_K);
}

// Gemma 2: gemma3's norms without q/k norms, a tied output, soft-capping
// keys (the tiny preset's low caps; the released 50 and 30 otherwise) and
// no RoPE keys.
TEST(SynthTest, Gemma2LayoutAndKeys) {
  auto b = build(tiny(SynthArch::kGemma2));
  const gguf::GgufFile& f = *b->file;
  EXPECT_EQ(f.get_int("gemma2.attention.sliding_window"), 8);
  EXPECT_FLOAT_EQ(f.get_float("gemma2.attn_logit_softcapping"), 4.0f);
  EXPECT_FLOAT_EQ(f.get_float("gemma2.final_logit_softcapping"), 8.0f);
  EXPECT_EQ(f.get_int("gemma2.attention.key_length"), 16);
  EXPECT_FALSE(f.has("gemma2.rope.freq_base"));
  EXPECT_EQ(f.find_tensor("output.weight"), nullptr);
  EXPECT_EQ(f.find_tensor("blk.0.attn_q_norm.weight"), nullptr);
  EXPECT_NE(f.find_tensor("blk.1.post_attention_norm.weight"), nullptr);
  EXPECT_NE(f.find_tensor("blk.1.post_ffw_norm.weight"), nullptr);
  EXPECT_EQ(f.tensors().size(), 2u + 2 * 11);
  SynthOptions big = tiny(SynthArch::kGemma2);  // a preset without the tiny caps, shrunk
  big.preset = "llama-7b";
  big.overrides.n_embd = 64;
  big.overrides.n_ff = 128;
  big.overrides.n_head = 4;
  big.overrides.n_kv_head = 2;
  big.overrides.n_layer = 1;
  big.overrides.vocab = 300;
  const std::vector<uint8_t> bytes = build_synth_model(big, nullptr).to_bytes();
  const gguf::GgufFile g = gguf::GgufFile::parse(bytes, "big");
  EXPECT_FLOAT_EQ(g.get_float("gemma2.attn_logit_softcapping"), 50.0f);
  EXPECT_FLOAT_EQ(g.get_float("gemma2.final_logit_softcapping"), 30.0f);
}

// Parameter counts of the published models: Phi-3-mini 3,821,079,552 and
// Gemma 2 2B 2,614,341,888 (its head size, 256, is not n_embd / n_head).
TEST(SynthTest, Phi3AndGemma2PresetsMatchThePublishedModels) {
  const SynthShape phi = resolve_synth_shape(SynthArch::kPhi3, "phi3-mini", {});
  EXPECT_EQ(count_params(plan_synth_tensors(SynthArch::kPhi3, phi, {}, TensorType::F16, nullptr)), 3821079552);
  const SynthShape gemma = resolve_synth_shape(SynthArch::kGemma2, "gemma2-2b", {});
  EXPECT_EQ(gemma.head_dim, 256);
  EXPECT_TRUE(gemma.tied_output);
  EXPECT_EQ(count_params(plan_synth_tensors(SynthArch::kGemma2, gemma, {}, TensorType::F16, nullptr)), 2614341888);
}

// The values follow their distributions: matrices N(0, 1/sqrt(row length)),
// norms 1 + N(0, 0.02). With 32768 samples the sample mean and standard
// deviation are within 1% of the truth with overwhelming probability; the
// bounds allow 5%.
TEST(SynthTest, WeightsHaveTheIntendedScale) {
  auto b = build(tiny());
  auto stats = [&](const char* name) {
    const gguf::TensorInfo& t = b->file->tensor(name);
    std::vector<float> v(static_cast<size_t>(t.num_elements()));
    kernels::dequantize_row_ref(t.type, t.data, v.data(), t.num_elements());
    double sum = 0, sq = 0;
    for (float x : v) sum += x;
    const double mean = sum / static_cast<double>(v.size());
    for (float x : v) sq += (x - mean) * (x - mean);
    return std::pair{mean, std::sqrt(sq / static_cast<double>(v.size()))};
  };
  const auto [emb_mean, emb_std] = stats("token_embd.weight");  // 64 x 512
  EXPECT_NEAR(emb_mean, 0.0, 0.005);
  EXPECT_NEAR(emb_std, 1.0 / 8.0, 0.05 / 8.0);
  const auto [down_mean, down_std] = stats("blk.0.ffn_down.weight");  // rows of 128
  EXPECT_NEAR(down_mean, 0.0, 0.01);
  EXPECT_NEAR(down_std, 1.0 / std::sqrt(128.0), 0.05 / std::sqrt(128.0));
  const auto [norm_mean, norm_std] = stats("blk.0.attn_norm.weight");
  EXPECT_NEAR(norm_mean, 1.0, 0.01);
  EXPECT_GT(norm_std, 0.01);
  EXPECT_LT(norm_std, 0.03);
}

TEST(SynthTest, BadShapesAreErrors) {
  ShapeOverrides o;
  EXPECT_THROW(resolve_synth_shape(SynthArch::kLlama, "huge", o), Error);
  o.n_kv_head = 3;
  EXPECT_THROW(resolve_synth_shape(SynthArch::kLlama, "tiny", o), Error);
  o = {};
  o.n_head = 5;  // 64 % 5 != 0 and no --head-dim
  o.n_kv_head = 5;
  EXPECT_THROW(resolve_synth_shape(SynthArch::kLlama, "tiny", o), Error);
  o.head_dim = 8;
  EXPECT_EQ(resolve_synth_shape(SynthArch::kLlama, "tiny", o).head_dim, 8);
  o = {};
  o.n_layer = 0;
  EXPECT_THROW(resolve_synth_shape(SynthArch::kLlama, "tiny", o), Error);
  SynthOptions small = tiny();
  small.overrides.vocab = 100;  // below the 259 tokens of the built-in vocabulary
  EXPECT_THROW(build_synth_model(small, nullptr), Error);
}

TEST(SynthTest, VocabFromCopiesTheTokenizer) {
  const auto path = shared_dir() / "vocab" / "ggml-vocab-gpt-2.gguf";
  if (!std::filesystem::exists(path)) TM_MISSING_DEPENDENCY("no " << path << " (set TOKENMILL_SHARED)");
  SynthOptions o = tiny(SynthArch::kQwen2, "Q8_0");
  o.vocab_from = path.string();
  auto b = build(o);
  const gguf::GgufFile& f = *b->file;
  EXPECT_EQ(f.get_string("tokenizer.ggml.model"), "gpt2");
  EXPECT_EQ(f.get_array("tokenizer.ggml.merges").items.size(), 50000u);
  EXPECT_EQ(f.tensor("token_embd.weight").dims[1], 50257);
  EXPECT_EQ(f.get_int("qwen2.vocab_size"), 50257);
  o.overrides.vocab = 1000;
  EXPECT_THROW(build_synth_model(o, nullptr), Error);
}

TEST(SynthTest, BuiltinVocabIsMergeClosedAndExact) {
  for (int64_t size : {259, 512, 32000, 40000}) {
    const VocabTables v = builtin_vocab(size);
    ASSERT_EQ(static_cast<int64_t>(v.tokens.size()), size);
    ASSERT_EQ(v.scores.size(), v.tokens.size());
    ASSERT_EQ(v.types.size(), v.tokens.size());
    EXPECT_EQ(v.tokens[0], "<unk>");
    EXPECT_EQ(v.types[0], kTokenUnknown);
    EXPECT_EQ(v.tokens[2], "</s>");
    EXPECT_EQ(v.types[2], kTokenControl);
    EXPECT_EQ(v.tokens[3 + 0x0A], "<0x0A>");
    EXPECT_EQ(v.types[258], kTokenByte);
    const std::set<std::string> all(v.tokens.begin(), v.tokens.end());
    EXPECT_EQ(all.size(), v.tokens.size());
    for (int64_t i = 259; i < size; ++i) {
      const std::string& t = v.tokens[static_cast<size_t>(i)];
      if (v.types[static_cast<size_t>(i)] != kTokenNormal) continue;
      EXPECT_LT(v.scores[static_cast<size_t>(i)], v.scores[static_cast<size_t>(i) - 1] + 1e-3f);
      size_t last = t.size() - 1;  // start of the last UTF-8 character
      while (last > 0 && (static_cast<unsigned char>(t[last]) & 0xC0) == 0x80) --last;
      if (last > 0) {
        EXPECT_TRUE(all.count(t.substr(0, last))) << t;
      }
    }
  }
  const VocabTables small = builtin_vocab(512);
  EXPECT_EQ(small.tokens[259], "\xE2\x96\x81");
  const VocabTables big = builtin_vocab(32000);
  EXPECT_NE(std::find(big.tokens.begin(), big.tokens.end(), "\xE2\x96\x81the"), big.tokens.end());
  EXPECT_EQ(builtin_vocab(40000).types.back(), kTokenUnused);
  EXPECT_THROW(builtin_vocab(258), Error);
}

TEST(SynthTest, WeightFormatNames) {
  EXPECT_EQ(llama_file_type(*parse_weight_format("f32")), 0u);
  EXPECT_EQ(llama_file_type(*parse_weight_format("F16")), 1u);
  EXPECT_EQ(llama_file_type(*parse_weight_format("q8_0")), 7u);
  EXPECT_EQ(llama_file_type(*parse_weight_format("Q4_K_M")), 15u);
  EXPECT_EQ(weight_format_name(*parse_weight_format("q4_k_m")), "Q4_K_M");
  EXPECT_FALSE(parse_weight_format("Q8_K"));
  EXPECT_FALSE(parse_weight_format("Q7"));
  EXPECT_EQ(fitting_type(TensorType::Q4_0, 172, TensorType::F32), TensorType::F32);
  EXPECT_EQ(fitting_type(TensorType::Q6_K, 96, TensorType::F16), TensorType::Q8_0);
  EXPECT_EQ(fitting_type(TensorType::BF16, 7, TensorType::F16), TensorType::BF16);
}

}  // namespace
}  // namespace tokenmill::model
