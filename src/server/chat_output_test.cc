// A chat reply split into reasoning, content and tool calls: the think
// span first, then the family's calls; streamed in any pieces, the deltas
// add up to the whole parse.
#include "server/chat_output.h"

#include <gtest/gtest.h>

namespace tokenmill::server {
namespace {

ParsedChoice streamed(std::string_view text, const ChatOutputFormat& format, size_t piece) {
  ChatOutputParser parser(format);
  ParsedOutput all;
  for (size_t at = 0; at < text.size(); at += piece) all.append(parser.feed(text.substr(at, piece)));
  all.append(parser.finish());
  return merged_choice(std::move(all));
}

void expect_same(const ParsedChoice& a, const ParsedChoice& b) {
  EXPECT_EQ(a.content, b.content);
  EXPECT_EQ(a.reasoning, b.reasoning);
  ASSERT_EQ(a.calls.size(), b.calls.size());
  for (size_t i = 0; i < a.calls.size(); ++i) {
    EXPECT_EQ(a.calls[i].name, b.calls[i].name);
    EXPECT_EQ(a.calls[i].arguments, b.calls[i].arguments);
  }
}

TEST(ChatOutput, ThinkThenHermesCalls) {
  ChatOutputFormat f;
  f.reasoning = ReasoningFormat::kDeepSeek;
  f.tool_calls = true;
  const std::string text =
      "<think>\nthe user wants weather\n</think>\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
      "{\"city\": \"Paris\"}}\n</tool_call>";
  const ParsedChoice whole = parse_chat_output(text, f);
  EXPECT_EQ(whole.reasoning, "the user wants weather");
  EXPECT_EQ(whole.content, "");
  ASSERT_EQ(whole.calls.size(), 1u);
  EXPECT_EQ(whole.calls[0].name, "get_weather");
  EXPECT_EQ(whole.calls[0].arguments, "{\"city\": \"Paris\"}");
  for (size_t piece : {1, 2, 3, 7, 64}) expect_same(streamed(text, f, piece), whole);
}

TEST(ChatOutput, PromptOpenedThinkAndNoTools) {
  ChatOutputFormat f;
  f.reasoning = ReasoningFormat::kDeepSeek;
  f.think_open = true;
  const std::string text = "short thought</think>\n\nThe answer.";
  const ParsedChoice whole = parse_chat_output(text, f);
  EXPECT_EQ(whole.reasoning, "short thought");
  EXPECT_EQ(whole.content, "The answer.");
  EXPECT_TRUE(whole.calls.empty());
  for (size_t piece : {1, 4}) expect_same(streamed(text, f, piece), whole);
  // Without reasoning extraction, everything is content.
  EXPECT_FALSE(ChatOutputFormat{}.active());
  f.reasoning = ReasoningFormat::kNone;
  f.think_open = false;
  EXPECT_EQ(parse_chat_output(text, f).content, text);
}

TEST(ChatOutput, GptOssChannelsWithoutTools) {
  ChatOutputFormat f;
  f.tool_format = ToolCallFormat::kGptOss;
  ASSERT_TRUE(f.active());
  const std::string text =
      "<|channel|>analysis<|message|>think here<|end|><|start|>assistant<|channel|>final<|message|>Hi there.";
  const ParsedChoice whole = parse_chat_output(text, f);
  EXPECT_EQ(whole.reasoning, "think here");
  EXPECT_EQ(whole.content, "Hi there.");
  for (size_t piece : {1, 5}) expect_same(streamed(text, f, piece), whole);
}

TEST(ChatOutput, DescribesTheToolFormat) {
  ChatOutputFormat f;
  f.tool_format = ToolCallFormat::kLlama3Json;
  EXPECT_EQ(f.describe_tools(), "llama3_json");
  f.tool_format = ToolCallFormat::kHermes;
  f.tool_format_recognised = false;
  EXPECT_NE(f.describe_tools().find("not recognised"), std::string::npos);
}

}  // namespace
}  // namespace tokenmill::server
