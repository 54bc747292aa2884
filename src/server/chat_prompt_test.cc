#include "server/chat_prompt.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "gguf/writer.h"
#include "server/api_error.h"
#include "util/error.h"

namespace tokenmill::server {
namespace {

gguf::GgufFile file_with(const std::optional<std::string>& chat_template, std::vector<uint8_t>& keep,
                         const std::optional<std::string>& tool_use = std::nullopt) {
  gguf::GgufWriter w;
  w.set("general.architecture", gguf::Value::str("llama"));
  if (chat_template) w.set("tokenizer.chat_template", gguf::Value::str(*chat_template));
  if (tool_use) w.set("tokenizer.chat_template.tool_use", gguf::Value::str(*tool_use));
  keep = w.to_bytes();
  return gguf::GgufFile::parse(keep, "test.gguf");
}

constexpr const char* kTurns =
    "{{ bos_token }}{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";

ChatConversation user_says(const std::string& text) { return plain_conversation({{"user", text}}); }

// The GGUF's own template is rendered as written (not mapped to a preset).
TEST(ChatPrompt, GgufTemplateIsRenderedAsWritten) {
  std::vector<uint8_t> bytes;
  const gguf::GgufFile f = file_with(kTurns, bytes);
  const std::optional<ChatFormat> c = select_chat_format("", f, nullptr);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->name(), "jinja");
  EXPECT_EQ(c->source, "GGUF tokenizer.chat_template");
  EXPECT_EQ(render_chat_text(*c, user_says("hi"), {}), "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
  ChatRenderOptions no_prompt;
  no_prompt.add_generation_prompt = false;
  EXPECT_EQ(render_chat_text(*c, user_says("hi"), no_prompt), "<|im_start|>user\nhi<|im_end|>\n");
}

// A template that does not parse falls back to the preset its markers
// name and says why; one with no known markers serves no chat.
TEST(ChatPrompt, BrokenGgufTemplateFallsBackWithAWarning) {
  std::vector<uint8_t> bytes;
  const std::optional<ChatFormat> c =
      select_chat_format("", file_with("{% for m in messages %}<start_of_turn>{{ m.role }", bytes), nullptr);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->name(), "gemma");
  EXPECT_NE(c->warning.find("does not parse"), std::string::npos) << c->warning;
  EXPECT_NE(c->warning.find("line 1"), std::string::npos) << c->warning;
  EXPECT_FALSE(select_chat_format("", file_with(std::nullopt, bytes), nullptr).has_value());
  EXPECT_FALSE(select_chat_format("", file_with("{% if %}", bytes), nullptr).has_value());
}

TEST(ChatPrompt, OverrideByNameOrFile) {
  std::vector<uint8_t> bytes;
  const gguf::GgufFile f = file_with(kTurns, bytes);
  EXPECT_EQ(select_chat_format("chatml", f, nullptr)->name(), "chatml");
  EXPECT_THROW(select_chat_format("nonsense", f, nullptr), Error);
  const std::string path = ::testing::TempDir() + "/tmpl.jinja";
  {
    std::ofstream out(path);
    out << "{% for m in messages %}[{{ m.role | upper }}] {{ m.content }}\n{% endfor %}";
  }
  const std::optional<ChatFormat> file = select_chat_format(path, f, nullptr);
  ASSERT_TRUE(file.has_value());
  EXPECT_EQ(file->source, "file " + path);
  EXPECT_EQ(render_chat_text(*file, user_says("hi"), {}), "[USER] hi\n");
  {
    std::ofstream out(path);
    out << "line one\n{% for x in %}";
  }
  try {
    select_chat_format(path, f, nullptr);
    FAIL() << "a template that does not parse was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("line 2"), std::string::npos) << e.what();
  }
  std::remove(path.c_str());
}

// raise_exception in the template refuses the conversation with a 400
// that carries the template's own message.
TEST(ChatPrompt, TemplateRefusalIsABadRequest) {
  std::vector<uint8_t> bytes;
  const gguf::GgufFile f = file_with(
      "{% if messages[0].role == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}ok", bytes);
  const ChatFormat c = *select_chat_format("", f, nullptr);
  EXPECT_EQ(render_chat_text(c, user_says("hi"), {}), "ok");
  try {
    render_chat_text(c, plain_conversation({{"system", "s"}, {"user", "u"}}), {});
    FAIL() << "the template's refusal was ignored";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    EXPECT_NE(std::string(e.what()).find("System role not supported"), std::string::npos) << e.what();
  }
}

// The sandbox's bounds are the server's fault, not the client's: 500.
TEST(ChatPrompt, TemplateOverItsBoundsIsAServerError) {
  std::vector<uint8_t> bytes;
  const ChatFormat c =
      *select_chat_format("", file_with("{% for i in range(1000000000) %}x{% endfor %}", bytes), nullptr);
  try {
    render_chat_text(c, user_says("hi"), {});
    FAIL() << "an endless template rendered";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 500);
  }
}

// Template variables: tools (only when offered), tool turns as sent with
// their arguments as objects, reasoning_content, chat_template_kwargs.
TEST(ChatPrompt, ContextCarriesToolsKwargsAndToolTurns) {
  std::vector<uint8_t> bytes;
  const ChatFormat c = *select_chat_format(
      "",
      file_with(
          "{% if tools %}T={{ tools | map(attribute='function') | map(attribute='name') | join(',') }};{% endif %}"
          "{% for m in messages %}{{ m.role }}:{% if m.tool_calls %}{{ m.tool_calls[0].function.arguments.city }}"
          "{% endif %}{{ m.reasoning_content or '' }}|{% endfor %}think={{ enable_thinking }}",
          bytes),
      nullptr);
  ChatConversation conv = plain_conversation({{"user", "weather?"}});
  ApiMessage call;
  call.role = "assistant";
  call.reasoning_content = "R";
  call.tool_calls.push_back({"call_1", "get_weather", R"({"city": "Paris"})"});
  conv.messages.push_back(call);
  ApiMessage result;
  result.role = "tool";
  result.tool_call_id = "call_1";
  result.content = "sunny";
  conv.messages.push_back(result);
  conv.template_kwargs["enable_thinking"] = false;
  EXPECT_EQ(render_chat_text(c, conv, {}), "user:|assistant:ParisR|tool:|think=False");
  conv.tool_request.tools.push_back({"get_weather", "", RequestJson::object(), false});
  conv.tools = RequestJson::parse(R"([{"type": "function", "function": {"name": "get_weather"}}])");
  EXPECT_EQ(render_chat_text(c, conv, {}), "T=get_weather;user:|assistant:ParisR|tool:|think=False");
}

// A template that knows nothing of tools gets them folded into text.
TEST(ChatPrompt, ToolsFoldIntoTextForTemplatesWithoutTools) {
  std::vector<uint8_t> bytes;
  const ChatFormat c = *select_chat_format(
      "", file_with("{% for m in messages %}{{ m.role }}:{{ m.content }}|{% endfor %}", bytes), nullptr);
  ChatConversation conv = user_says("weather?");
  conv.tool_request.tools.push_back({"get_weather", "Weather by city", RequestJson::object(), false});
  conv.tools = RequestJson::parse(R"([{"type": "function", "function": {"name": "get_weather"}}])");
  const std::string text = render_chat_text(c, conv, {});
  EXPECT_EQ(text.rfind("system:", 0), 0u) << text;
  EXPECT_NE(text.find("get_weather"), std::string::npos) << text;
  EXPECT_NE(text.find("<tool_call>"), std::string::npos) << text;
}

// The GGUF's tool_use template answers requests that offer tools.
TEST(ChatPrompt, NamedToolUseTemplate) {
  std::vector<uint8_t> bytes;
  const ChatFormat c = *select_chat_format("", file_with("plain", bytes, "with tools {{ tools | length }}"), nullptr);
  ChatConversation conv = user_says("hi");
  EXPECT_EQ(render_chat_text(c, conv, {}), "plain");
  conv.tool_request.tools.push_back({"f", "", RequestJson::object(), false});
  conv.tools = RequestJson::parse(R"([{"type": "function", "function": {"name": "f"}}])");
  EXPECT_EQ(render_chat_text(c, conv, {}), "with tools 1");
}

TEST(ChatPrompt, ContinueFinalMessageCutsAfterItsContent) {
  std::vector<uint8_t> bytes;
  const ChatFormat c = *select_chat_format("", file_with(kTurns, bytes), nullptr);
  ChatConversation conv = plain_conversation({{"user", "hi"}, {"assistant", "Once upon "}});
  ChatRenderOptions o;
  o.continue_final_message = true;
  EXPECT_EQ(render_chat_text(c, conv, o), "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\nOnce upon");
}

tokenizer::Tokenizer vocab_with(std::vector<std::string> extra, bool add_bos) {
  tokenizer::TokenizerSpec spec;
  spec.tokens = {"<unk>", "<s>", "</s>", "a", "b"};
  spec.types = {tokenizer::TokenType::kUnknown, tokenizer::TokenType::kControl, tokenizer::TokenType::kControl,
                tokenizer::TokenType::kNormal, tokenizer::TokenType::kNormal};
  for (std::string& t : extra) {
    spec.tokens.push_back(std::move(t));
    spec.types.push_back(tokenizer::TokenType::kControl);
  }
  spec.bos_id = 1;
  spec.eos_id = 2;
  spec.add_bos = add_bos;
  spec.add_space_prefix = false;
  return tokenizer::Tokenizer::from_spec(std::move(spec));
}

// No template in the file: the vocabulary's turn markers decide.
TEST(ChatPrompt, FromVocabularyMarkers) {
  std::vector<uint8_t> bytes;
  const gguf::GgufFile f = file_with(std::nullopt, bytes);
  const tokenizer::Tokenizer gemma = vocab_with({"<start_of_turn>", "<end_of_turn>"}, true);
  const std::optional<ChatFormat> g = select_chat_format("", f, &gemma);
  ASSERT_TRUE(g.has_value());
  EXPECT_EQ(g->name(), "gemma");
  EXPECT_EQ(g->bos_text, "<s>");
  EXPECT_EQ(g->eos_text, "</s>");
  const tokenizer::Tokenizer chatml = vocab_with({"<|im_start|>", "<|im_end|>"}, true);
  EXPECT_EQ(select_chat_format("", f, &chatml)->name(), "chatml");
  const tokenizer::Tokenizer plain = vocab_with({}, true);
  EXPECT_FALSE(select_chat_format("", f, &plain).has_value());
  // Rendering: the markers become single special tokens after BOS.
  const std::vector<int32_t> ids = chat_prompt_tokens(*g, gemma, user_says("a"), {});
  ASSERT_GE(ids.size(), 2u);
  EXPECT_EQ(ids[0], 1);  // BOS
  EXPECT_EQ(ids[1], 5);  // <start_of_turn>
}

// Exactly one BOS whether or not the template writes {{ bos_token }};
// add_special_tokens puts one more in front, as vLLM does.
TEST(ChatPrompt, OneBosWhetherOrNotTheTemplateWritesIt) {
  std::vector<uint8_t> bytes;
  const tokenizer::Tokenizer tok = vocab_with({"<|im_start|>", "<|im_end|>"}, true);
  const ChatFormat with = *select_chat_format("", file_with("{{ bos_token }}a", bytes), &tok);
  const ChatFormat without = *select_chat_format("", file_with("a", bytes), &tok);
  EXPECT_EQ(chat_prompt_tokens(with, tok, user_says("x"), {}), (std::vector<int32_t>{1, 3}));
  EXPECT_EQ(chat_prompt_tokens(without, tok, user_says("x"), {}), (std::vector<int32_t>{1, 3}));
  ChatRenderOptions extra;
  extra.add_special_tokens = true;
  EXPECT_EQ(chat_prompt_tokens(with, tok, user_says("x"), extra), (std::vector<int32_t>{1, 1, 3}));
  const tokenizer::Tokenizer no_bos = vocab_with({}, false);
  const ChatFormat plain = *select_chat_format("", file_with("a", bytes), &no_bos);
  EXPECT_EQ(chat_prompt_tokens(plain, no_bos, user_says("x"), {}), (std::vector<int32_t>{3}));
}

}  // namespace
}  // namespace tokenmill::server
