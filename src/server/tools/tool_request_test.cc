// Tools on chat requests: tools / tool_choice / parallel_tool_calls parsing,
// assistant tool_calls and tool messages, and how they reach the template.
#include <gtest/gtest.h>

#include "server/api_error.h"
#include "server/openai/openai_request.h"
#include "server/tools/tool_prompt.h"
#include "tokenizer/chat_template.h"

namespace tokenmill::server {
namespace {

// The turns a template without tool support renders (tool_prompt.h).
std::vector<tokenizer::ChatMessage> turns(const ChatRequest& r) {
  return template_messages(r.conversation.messages, r.conversation.tool_request);
}
std::vector<tokenizer::ChatMessage> turns(const TokenizeRequest& r) {
  return template_messages(r.conversation.messages, ToolsRequest{});
}

const ParseLimits kToolLimits{/*n_vocab=*/1000, /*json=*/{}};
constexpr const char* kWeatherTool =
    R"({"type": "function", "function": {"name": "get_weather", "description": "Weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        "strict": true}})";
constexpr const char* kTimeTool = R"({"type": "function", "function": {"name": "get_time"}})";

ChatRequest chat(const std::string& fields) {
  return parse_chat_request(R"({"messages": [{"role": "user", "content": "Hi"}], )" + fields + "}", kToolLimits);
}

void tool_chat_400(const std::string& fields, const std::string& param, const std::string& needle) {
  try {
    chat(fields);
    ADD_FAILURE() << "no error; expected one about " << param;
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    EXPECT_EQ(e.param().value_or("<none>"), param) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

void messages_400(const std::string& messages, const std::string& param, const std::string& needle) {
  try {
    parse_chat_request(R"({"messages": )" + messages + "}", kToolLimits);
    ADD_FAILURE() << "no error; expected one about " << param;
  } catch (const ApiError& e) {
    EXPECT_EQ(e.param().value_or("<none>"), param) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(ToolsRequest, ToolsAndDefaults) {
  const ChatRequest r = chat(std::string(R"("tools": [)") + kWeatherTool + ", " + kTimeTool + "]");
  ASSERT_EQ(r.conversation.tool_request.tools.size(), 2u);
  EXPECT_EQ(r.conversation.tool_request.tools[0].name, "get_weather");
  EXPECT_EQ(r.conversation.tool_request.tools[0].description, "Weather in a city.");
  EXPECT_TRUE(r.conversation.tool_request.tools[0].strict);
  EXPECT_EQ(r.conversation.tool_request.tools[0].parameters["required"][0], "city");
  EXPECT_EQ(r.conversation.tool_request.tools[1].parameters,
            RequestJson::parse(R"({"type": "object", "properties": {}})"));
  // Keys stay in the order sent (the grammar writes properties in it).
  EXPECT_EQ(r.conversation.tool_request.tools[0].parameters.dump(),
            R"({"type":"object","properties":{"city":{"type":"string"}},"required":["city"]})");
  EXPECT_EQ(r.conversation.tool_request.mode, ToolChoiceMode::kAuto);
  EXPECT_TRUE(r.conversation.tool_request.parallel);
  EXPECT_TRUE(r.conversation.tool_request.active());
  // The definitions reach the prompt as a system message.
  ASSERT_EQ(turns(r).size(), 2u);
  EXPECT_EQ(turns(r)[0].role, "system");
  EXPECT_NE(turns(r)[0].content.find(R"("name":"get_weather")"), std::string::npos) << turns(r)[0].content;
  EXPECT_NE(turns(r)[0].content.find("<tool_call>\n{\"name\": \"FUNCTION_NAME\""), std::string::npos);
  EXPECT_FALSE(chat(R"("tools": [])").conversation.tool_request.active());
}

TEST(ToolsRequest, ToolChoice) {
  const std::string tools = std::string(R"("tools": [)") + kWeatherTool + ", " + kTimeTool + "], ";
  EXPECT_EQ(chat(tools + R"("tool_choice": "required")").conversation.tool_request.mode, ToolChoiceMode::kRequired);
  EXPECT_EQ(chat(tools + R"("tool_choice": "auto")").conversation.tool_request.mode, ToolChoiceMode::kAuto);
  const ChatRequest none = chat(tools + R"("tool_choice": "none")");
  EXPECT_FALSE(none.conversation.tool_request.active());
  EXPECT_EQ(turns(none).size(), 1u);  // no tool text in the prompt
  const ChatRequest named = chat(
      tools + R"("tool_choice": {"type": "function", "function": {"name": "get_time"}}, "parallel_tool_calls": false)");
  EXPECT_EQ(named.conversation.tool_request.mode, ToolChoiceMode::kNamed);
  EXPECT_EQ(named.conversation.tool_request.named, "get_time");
  EXPECT_FALSE(named.conversation.tool_request.parallel);
  EXPECT_NE(turns(named)[0].content.find(R"(You must call the function "get_time".)"), std::string::npos);
  EXPECT_FALSE(chat(R"("tool_choice": "none")").conversation.tool_request.active());
  EXPECT_FALSE(chat(R"("tool_choice": "auto", "parallel_tool_calls": true)").conversation.tool_request.active());
}

TEST(ToolsRequest, Errors) {
  const std::string tools = std::string(R"("tools": [)") + kWeatherTool + "], ";
  tool_chat_400(R"("tools": {})", "tools", "must be a list");
  tool_chat_400(R"("tools": [5])", "tools[0]", "must be an object");
  tool_chat_400(R"("tools": [{"type": "retrieval", "function": {"name": "f"}}])", "tools[0].type", "\"function\"");
  tool_chat_400(R"("tools": [{"function": {"name": "f"}}])", "tools[0].type", "got nothing");
  tool_chat_400(R"("tools": [{"type": "function", "function": {"description": "d"}}])", "tools[0].function.name",
                "is required");
  tool_chat_400(R"("tools": [{"type": "function", "function": {"name": "a.b"}}])", "tools[0].function.name",
                "^[a-zA-Z0-9_-]{1,64}$");
  tool_chat_400(R"("tools": [{"type": "function", "function": {"name": "f", "parameters": []}}])",
                "tools[0].function.parameters", "JSON Schema object");
  tool_chat_400(R"("tools": [{"type": "function", "function": {"name": "f", "returns": {}}}])",
                "tools[0].function.returns", "unrecognized");
  tool_chat_400(R"("tools": [{"type": "function", "function": {"name": "f", "strict": "yes"}}])",
                "tools[0].function.strict", "boolean");
  tool_chat_400(
      R"("tools": [{"type": "function", "function": {"name": "f"}}, {"type": "function", "function": {"name": "f"}}])",
      "tools", "twice");
  std::string many = R"("tools": [)";
  for (int i = 0; i < 129; ++i)
    many += std::string(i ? "," : "") + R"({"type": "function", "function": {"name": "f)" + std::to_string(i) + "\"}}";
  tool_chat_400(many + "]", "tools", "at most 128");
  tool_chat_400(tools + R"("tool_choice": "always")", "tool_choice", "\"required\"");
  tool_chat_400(tools + R"("tool_choice": 1)", "tool_choice", "string or an object");
  tool_chat_400(tools + R"("tool_choice": {"type": "function", "function": {"name": "nope"}})", "tool_choice",
                "does not declare");
  tool_chat_400(tools + R"("tool_choice": {"type": "function"})", "tool_choice.function", "must be an object");
  tool_chat_400(tools + R"("tool_choice": {"type": "tool", "function": {"name": "get_weather"}})", "tool_choice.type",
                "\"function\"");
  tool_chat_400(R"("tool_choice": "required")", "tool_choice", "declares none");
  tool_chat_400(tools + R"("parallel_tool_calls": "no")", "parallel_tool_calls", "boolean");
  tool_chat_400(R"("function_call": "auto")", "function_call", "send 'tools'");
  // Tools and a response_format together are refused (the calls fix the format) ...
  tool_chat_400(tools + R"("response_format": {"type": "json_object"})", "response_format",
                "cannot be combined with 'tools'");
  tool_chat_400(tools + R"("guided_regex": "a")", "guided_regex", "cannot be combined");
  // ... unless tool_choice is "none".
  EXPECT_TRUE(chat(tools + R"("tool_choice": "none", "guided_regex": "a")").common.constraint);
}

TEST(ToolsRequest, AssistantToolCallsAndToolResults) {
  const ChatRequest r = parse_chat_request(std::string(R"({"tools": [)") + kWeatherTool + R"(], "messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather in Paris and Rome?"},
        {"role": "assistant", "content": null, "refusal": null, "tool_calls": [
          {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}},
          {"id": "call_2", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Rome"}}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "18 C"},
        {"role": "tool", "tool_call_id": "call_2", "content": [{"type": "text", "text": "21 C"}]},
        {"role": "user", "content": "Thanks. Which is warmer?"}]})",
                                           kToolLimits);
  ASSERT_EQ(turns(r).size(), 4u);
  EXPECT_EQ(turns(r)[0].role, "system");
  EXPECT_EQ(turns(r)[0].content.rfind("Be brief.\n\nYou can call", 0), 0u) << turns(r)[0].content;
  EXPECT_EQ(turns(r)[2].role, "assistant");
  EXPECT_EQ(turns(r)[2].content,
            "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n"
            "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\":\"Rome\"}}\n</tool_call>");
  EXPECT_EQ(turns(r)[3].role, "user");
  EXPECT_EQ(turns(r)[3].content,
            "<tool_response>\n18 C\n</tool_response>\n<tool_response>\n21 C\n</tool_response>\n\n"
            "Thanks. Which is warmer?");
  // Gemma's strict alternation accepts the rendered conversation.
  EXPECT_NO_THROW(tokenizer::render_chat(tokenizer::ChatTemplateKind::Gemma, turns(r), true, ""));
  EXPECT_NO_THROW(tokenizer::render_chat(tokenizer::ChatTemplateKind::Mistral, turns(r), true, ""));
}

TEST(ToolsRequest, MessageErrors) {
  const std::string user = R"({"role": "user", "content": "x"})";
  const std::string call =
      R"({"role": "assistant", "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}]})";
  messages_400("[" + user + R"(, {"role": "tool", "tool_call_id": "c", "content": "r"}])", "messages[1].role",
               "must follow an assistant message with 'tool_calls'");
  messages_400("[" + user + "," + call + R"(, {"role": "tool", "content": "r"}])", "messages[2].tool_call_id",
               "is required");
  messages_400("[" + user + R"(, {"role": "assistant", "content": null}])", "messages[1].content", "is required");
  messages_400(R"([{"role": "user", "content": "x", "tool_calls": []}])", "messages[0].tool_calls",
               "only allowed on assistant");
  messages_400(R"([{"role": "user", "content": "x", "tool_call_id": "c"}])", "messages[0].tool_call_id",
               "only allowed on tool");
  messages_400("[" + user + R"(, {"role": "assistant", "tool_calls": {}}])", "messages[1].tool_calls",
               "must be a list");
  messages_400(
      "[" + user + R"(, {"role": "assistant", "tool_calls": [{"type": "function", "function": {"arguments": "{}"}}]}])",
      "messages[1].tool_calls[0].function.name", "is required");
  messages_400("[" + user + R"(, {"role": "assistant", "tool_calls": [{"type": "x", "function": {"name": "f"}}]}])",
               "messages[1].tool_calls[0].type", "\"function\"");
  messages_400("[" + user + R"(, {"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": 3}}]}])",
               "messages[1].tool_calls[0].function.arguments", "string of JSON");
  messages_400(R"([{"role": "function", "content": "x"}])", "messages[0].role", "\"tool\"");
}

TEST(ToolPrompt, CallText) {
  EXPECT_EQ(tool_call_text("f", "{\"a\": 1}"),
            "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n</tool_call>");
  // Arguments that are not JSON are quoted, so the turn stays parseable.
  EXPECT_EQ(tool_call_text("f", "oops"), "<tool_call>\n{\"name\": \"f\", \"arguments\": \"oops\"}\n</tool_call>");
}

TEST(ToolPrompt, TokenizeRendersToolTurnsWithoutDefinitions) {
  const TokenizeRequest t = parse_tokenize_request(
      R"({"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "tool_calls": [
          {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
          {"role": "tool", "tool_call_id": "c", "content": "ok"}]})",
      kToolLimits);
  ASSERT_EQ(turns(t).size(), 3u);
  EXPECT_EQ(turns(t)[1].content, "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>");
  EXPECT_EQ(turns(t)[2].content, "<tool_response>\nok\n</tool_response>");
}

}  // namespace
}  // namespace tokenmill::server
