#include "model/llama2c_import.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "gguf/reader.h"
#include "kernels/quant.h"
#include "util/error.h"
#include "util/test_dependency.h"

namespace tokenmill::model {
namespace {

namespace fs = std::filesystem;
using gguf::TensorType;

using testing::shared_dir;

// A scratch folder removed with the fixture.
class Llama2cImportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tm_llama2c_" + std::to_string(getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string write(const std::string& name, const std::vector<uint8_t>& bytes) {
    const fs::path p = dir_ / name;
    std::ofstream(p, std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    return p.string();
  }

  fs::path dir_;
};

template <typename T>
void put(std::vector<uint8_t>& out, T v) {
  const size_t at = out.size();
  out.resize(at + sizeof(T));
  std::memcpy(out.data() + at, &v, sizeof(T));
}

// Element (row, col) of a tensor, dequantized.
float element(const gguf::TensorInfo& t, int64_t row, int64_t col) {
  std::vector<float> r(static_cast<size_t>(t.row_length()));
  const int64_t bytes = gguf::row_bytes(t.type, t.row_length());
  kernels::dequantize_row_ref(t.type, t.data + row * bytes, r.data(), t.row_length());
  return r[static_cast<size_t>(col)];
}

float checkpoint_float(const std::vector<uint8_t>& file, int64_t float_offset) {
  float v;
  std::memcpy(&v, file.data() + 28 + 4 * float_offset, 4);
  return v;
}

TEST_F(Llama2cImportTest, Stories260K) {
  const fs::path path = shared_dir() / "models" / "stories260K.bin";
  if (!fs::exists(path)) TM_MISSING_DEPENDENCY("no " << path << " (set TOKENMILL_SHARED)");
  std::ifstream in(path, std::ios::binary);
  const std::vector<uint8_t> ckpt((std::istreambuf_iterator<char>(in)), {});
  const std::string out = (dir_ / "stories.gguf").string();
  import_llama2c(path.string(), std::nullopt, out, WeightFormat{});
  const gguf::GgufFile f = gguf::GgufFile::open(out);

  EXPECT_EQ(f.get_string("general.architecture"), "llama");
  EXPECT_EQ(f.get_string("general.name"), "stories260K");
  EXPECT_EQ(f.get_int("general.file_type"), 0);
  EXPECT_EQ(f.get_int("llama.embedding_length"), 64);
  EXPECT_EQ(f.get_int("llama.feed_forward_length"), 172);
  EXPECT_EQ(f.get_int("llama.block_count"), 5);
  EXPECT_EQ(f.get_int("llama.attention.head_count"), 8);
  EXPECT_EQ(f.get_int("llama.attention.head_count_kv"), 4);
  EXPECT_EQ(f.get_int("llama.vocab_size"), 512);
  EXPECT_EQ(f.get_int("llama.context_length"), 512);
  EXPECT_EQ(f.get_int("llama.rope.dimension_count"), 8);
  EXPECT_FLOAT_EQ(f.get_float("llama.rope.freq_base"), 10000.0f);
  EXPECT_FLOAT_EQ(f.get_float("llama.attention.layer_norm_rms_epsilon"), 1e-5f);
  EXPECT_FALSE(f.has("tokenizer.ggml.tokens"));
  EXPECT_EQ(f.find_tensor("output.weight"), nullptr);  // shared classifier
  EXPECT_EQ(f.tensors().size(), 2u + 5 * 9);

  // Float offsets of the arrays, by hand: token_embedding 512*64 = 32768,
  // rms_att 5*64 = 320, wq 5*64*64 = 20480, wk and wv 5*32*64 = 10240 each,
  // wo 20480, rms_ffn 320, w1 w2 w3 5*172*64 = 55040 each: wk at 53568,
  // rms_ffn at 94528, w2 at 149888, w3 at 204928, rms_final at 259968.
  const gguf::TensorInfo& emb = f.tensor("token_embd.weight");
  EXPECT_EQ(emb.dims[0], 64);
  EXPECT_EQ(emb.dims[1], 512);
  EXPECT_EQ(element(emb, 300, 17), checkpoint_float(ckpt, 300 * 64 + 17));
  const gguf::TensorInfo& k3 = f.tensor("blk.3.attn_k.weight");
  EXPECT_EQ(k3.dims[1], 32);
  EXPECT_EQ(element(k3, 31, 5), checkpoint_float(ckpt, 53568 + 3 * 32 * 64 + 31 * 64 + 5));
  const gguf::TensorInfo& down4 = f.tensor("blk.4.ffn_down.weight");
  EXPECT_EQ(down4.dims[0], 172);
  EXPECT_EQ(element(down4, 63, 171), checkpoint_float(ckpt, 149888 + 4 * 64 * 172 + 63 * 172 + 171));
  const gguf::TensorInfo& up0 = f.tensor("blk.0.ffn_up.weight");  // w3
  EXPECT_EQ(element(up0, 1, 2), checkpoint_float(ckpt, 204928 + 64 + 2));
  EXPECT_EQ(element(f.tensor("blk.2.ffn_norm.weight"), 0, 9), checkpoint_float(ckpt, 94528 + 2 * 64 + 9));
  EXPECT_EQ(element(f.tensor("output_norm.weight"), 0, 63), checkpoint_float(ckpt, 259968 + 63));
}

TEST_F(Llama2cImportTest, Stories260KQuantizedWithFallbackNotes) {
  const fs::path path = shared_dir() / "models" / "stories260K.bin";
  if (!fs::exists(path)) TM_MISSING_DEPENDENCY("no " << path << " (set TOKENMILL_SHARED)");
  std::vector<std::string> notes;
  const auto bytes = build_llama2c_gguf(path.string(), std::nullopt, *parse_weight_format("Q8_0"), &notes).to_bytes();
  const gguf::GgufFile f = gguf::GgufFile::parse(bytes, "q8");
  EXPECT_EQ(f.get_int("general.file_type"), 7);
  EXPECT_EQ(f.tensor("blk.0.attn_q.weight").type, TensorType::Q8_0);
  EXPECT_EQ(f.tensor("blk.0.ffn_down.weight").type, TensorType::F32);  // rows of 172
  EXPECT_EQ(f.tensor("blk.0.ffn_norm.weight").type, TensorType::F32);
  EXPECT_EQ(notes.size(), 5u);  // one per ffn_down
}

// A hand-built model: dim 8, hidden 16, 2 layers, 2 heads, 1 kv head,
// vocab 6 (unshared), seq_len 4. Float i of the data holds i, so every
// element names its own offset.
std::vector<uint8_t> tiny_checkpoint(bool shared, int64_t extra_floats = 0) {
  std::vector<uint8_t> out;
  for (int32_t v : {8, 16, 2, 2, 1, shared ? 6 : -6, 4}) put(out, v);
  // emb 48, rms_att 16, wq 128, wk 64, wv 64, wo 128, rms_ffn 16, w1 256,
  // w2 256, w3 256, rms_final 8, freq 2*4*2 = 16: 1256; wcls 48.
  const int64_t n = 1256 + (shared ? 0 : 48) + extra_floats;
  for (int64_t i = 0; i < n; ++i) put(out, static_cast<float>(i));
  return out;
}

std::vector<uint8_t> tiny_tokenizer(int num_tokens) {
  const std::vector<std::string> text = {"<unk>", "\n<s>\n", "\n</s>\n", "<0x0A>", " the", "a b"};
  std::vector<uint8_t> out;
  put(out, int32_t{4});
  for (int i = 0; i < num_tokens; ++i) {
    put(out, -0.5f * static_cast<float>(i));
    put(out, static_cast<int32_t>(text[static_cast<size_t>(i)].size()));
    out.insert(out.end(), text[static_cast<size_t>(i)].begin(), text[static_cast<size_t>(i)].end());
  }
  return out;
}

TEST_F(Llama2cImportTest, UnsharedClassifierAndTokenizer) {
  const std::string ckpt = write("tiny.bin", tiny_checkpoint(false));
  const std::string tok = write("tok.bin", tiny_tokenizer(6));
  const auto bytes = build_llama2c_gguf(ckpt, tok, WeightFormat{}, nullptr).to_bytes();
  const gguf::GgufFile f = gguf::GgufFile::parse(bytes, "tiny");
  const gguf::TensorInfo& out = f.tensor("output.weight");
  EXPECT_EQ(out.dims[0], 8);
  EXPECT_EQ(out.dims[1], 6);
  EXPECT_EQ(element(out, 5, 7), 1256.0f + 5 * 8 + 7);
  // wv starts at 48 + 16 + 128 + 64 = 256; layer 1 at + 32.
  EXPECT_EQ(element(f.tensor("blk.1.attn_v.weight"), 3, 1), 256.0f + 32 + 3 * 8 + 1);
  EXPECT_EQ(f.tensor("blk.1.attn_v.weight").dims[1], 4);
  // wo at 320; layer 1 at + 64.
  EXPECT_EQ(element(f.tensor("blk.1.attn_output.weight"), 7, 0), 320.0f + 64 + 56);
  EXPECT_EQ(element(f.tensor("blk.0.attn_norm.weight"), 0, 3), 48.0f + 3);

  const auto& tokens = f.get_array("tokenizer.ggml.tokens").items;
  ASSERT_EQ(tokens.size(), 6u);
  EXPECT_EQ(tokens[1].as_string(), "<s>");
  EXPECT_EQ(tokens[2].as_string(), "</s>");
  EXPECT_EQ(tokens[3].as_string(), "<0x0A>");
  EXPECT_EQ(tokens[4].as_string(), "\xE2\x96\x81the");
  EXPECT_EQ(tokens[5].as_string(),
            "a\xE2\x96\x81"
            "b");
  const auto& types = f.get_array("tokenizer.ggml.token_type").items;
  const int64_t want_types[] = {2, 3, 3, 6, 1, 1};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(types[static_cast<size_t>(i)].as_int(), want_types[i]) << i;
  EXPECT_FLOAT_EQ(f.get_array("tokenizer.ggml.scores").items[4].as_float(), -2.0f);
  EXPECT_EQ(f.get_string("tokenizer.ggml.model"), "llama");
  EXPECT_EQ(f.get_int("tokenizer.ggml.bos_token_id"), 1);
  EXPECT_TRUE(f.get_bool("tokenizer.ggml.add_bos_token"));
}

TEST_F(Llama2cImportTest, SizeMismatchesAreErrors) {
  auto message = [&](const std::vector<uint8_t>& bytes) {
    const std::string path = write("bad.bin", bytes);
    try {
      build_llama2c_gguf(path, std::nullopt, WeightFormat{}, nullptr);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  std::vector<uint8_t> truncated = tiny_checkpoint(true);
  truncated.resize(truncated.size() - 4);
  EXPECT_NE(message(truncated).find("expected 5052 bytes, got 5048"), std::string::npos) << message(truncated);
  EXPECT_NE(message(tiny_checkpoint(true, 1)).find("expected 5052 bytes, got 5056"), std::string::npos);
  // Unshared, but the classifier is missing.
  std::vector<uint8_t> no_wcls = tiny_checkpoint(true);
  const int32_t negative_vocab = -6;
  std::memcpy(no_wcls.data() + 20, &negative_vocab, 4);
  EXPECT_NE(message(no_wcls).find("expected 5244 bytes"), std::string::npos);
  EXPECT_NE(message({1, 2, 3}).find("too small"), std::string::npos);
  std::vector<uint8_t> bad_heads = tiny_checkpoint(true);
  const int32_t three = 3;
  std::memcpy(bad_heads.data() + 12, &three, 4);  // n_heads 3: 8 % 3 != 0
  EXPECT_NE(message(bad_heads).find("not divisible"), std::string::npos);
  std::vector<uint8_t> zero_layers = tiny_checkpoint(true);
  std::memset(zero_layers.data() + 8, 0, 4);
  EXPECT_NE(message(zero_layers).find("n_layers"), std::string::npos);
}

TEST_F(Llama2cImportTest, BadTokenizerIsAnError) {
  const std::string ckpt = write("tiny.bin", tiny_checkpoint(true));
  const std::string short_tok = write("short.bin", tiny_tokenizer(5));
  EXPECT_THROW(build_llama2c_gguf(ckpt, short_tok, WeightFormat{}, nullptr), Error);
  std::vector<uint8_t> long_tok = tiny_tokenizer(6);
  long_tok.push_back(0);
  const std::string long_path = write("long.bin", long_tok);
  EXPECT_THROW(build_llama2c_gguf(ckpt, long_path, WeightFormat{}, nullptr), Error);
  EXPECT_THROW(build_llama2c_gguf(ckpt, (dir_ / "missing.bin").string(), WeightFormat{}, nullptr), Error);
}

}  // namespace
}  // namespace tokenmill::model
