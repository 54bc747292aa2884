#include "server/chat_prompt.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "gguf/writer.h"
#include "util/error.h"

namespace tokenmill::server {
namespace {

gguf::GgufFile file_with(const std::optional<std::string>& chat_template, std::vector<uint8_t>& keep) {
  gguf::GgufWriter w;
  w.set("general.architecture", gguf::Value::str("llama"));
  if (chat_template) w.set("tokenizer.chat_template", gguf::Value::str(*chat_template));
  keep = w.to_bytes();
  return gguf::GgufFile::parse(keep, "test.gguf");
}

TEST(ChatPrompt, FromGgufTemplate) {
  std::vector<uint8_t> bytes;
  const gguf::GgufFile f = file_with("{% for m in messages %}<start_of_turn>{{ m.role }}{% endfor %}", bytes);
  const std::optional<ChatFormat> c = select_chat_format("", f, nullptr);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->kind, tokenizer::ChatTemplateKind::Gemma);
}

TEST(ChatPrompt, NoneWhenAbsentOrUnknown) {
  std::vector<uint8_t> bytes;
  EXPECT_FALSE(select_chat_format("", file_with(std::nullopt, bytes), nullptr).has_value());
  EXPECT_FALSE(select_chat_format("", file_with("{{ weird }}", bytes), nullptr).has_value());
}

TEST(ChatPrompt, OverrideByNameOrFile) {
  std::vector<uint8_t> bytes;
  const gguf::GgufFile f = file_with("<start_of_turn>", bytes);
  EXPECT_EQ(select_chat_format("chatml", f, nullptr)->kind, tokenizer::ChatTemplateKind::ChatML);
  EXPECT_THROW(select_chat_format("nonsense", f, nullptr), Error);
  const std::string path = ::testing::TempDir() + "/tmpl.jinja";
  {
    std::ofstream out(path);
    out << "{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>' }}";
  }
  EXPECT_EQ(select_chat_format(path, f, nullptr)->kind, tokenizer::ChatTemplateKind::Llama3);
  {
    std::ofstream out(path);
    out << "{{ nothing recognisable }}";
  }
  EXPECT_THROW(select_chat_format(path, f, nullptr), Error);
  std::remove(path.c_str());
}

tokenizer::Tokenizer vocab_with(std::vector<std::string> extra) {
  tokenizer::TokenizerSpec spec;
  spec.tokens = {"<unk>", "<s>", "</s>", "a", "b"};
  spec.types = {tokenizer::TokenType::kUnknown, tokenizer::TokenType::kControl, tokenizer::TokenType::kControl,
                tokenizer::TokenType::kNormal, tokenizer::TokenType::kNormal};
  for (std::string& t : extra) {
    spec.tokens.push_back(std::move(t));
    spec.types.push_back(tokenizer::TokenType::kControl);
  }
  return tokenizer::Tokenizer::from_spec(std::move(spec));
}

// No template in the file: the vocabulary's turn markers decide.
TEST(ChatPrompt, FromVocabularyMarkers) {
  std::vector<uint8_t> bytes;
  const gguf::GgufFile f = file_with(std::nullopt, bytes);
  const tokenizer::Tokenizer gemma = vocab_with({"<start_of_turn>", "<end_of_turn>"});
  const std::optional<ChatFormat> g = select_chat_format("", f, &gemma);
  ASSERT_TRUE(g.has_value());
  EXPECT_EQ(g->kind, tokenizer::ChatTemplateKind::Gemma);
  EXPECT_EQ(g->bos_text, "<s>");
  const tokenizer::Tokenizer chatml = vocab_with({"<|im_start|>", "<|im_end|>"});
  EXPECT_EQ(select_chat_format("", f, &chatml)->kind, tokenizer::ChatTemplateKind::ChatML);
  const tokenizer::Tokenizer plain = vocab_with({});
  EXPECT_FALSE(select_chat_format("", f, &plain).has_value());
  // Rendering: the markers become single special tokens after BOS.
  const std::vector<tokenizer::ChatMessage> msgs = {{"user", "a"}};
  const std::vector<int32_t> ids = chat_prompt_tokens(*g, gemma, msgs, true);
  ASSERT_GE(ids.size(), 2u);
  EXPECT_EQ(ids[0], 1);  // BOS
  EXPECT_EQ(ids[1], 5);  // <start_of_turn>
}

}  // namespace
}  // namespace tokenmill::server
