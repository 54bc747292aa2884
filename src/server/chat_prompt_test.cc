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

}  // namespace
}  // namespace tokenmill::server
