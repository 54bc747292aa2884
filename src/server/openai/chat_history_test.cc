// Chat histories as client libraries send them back: assistant turns with
// tool_calls (content null or "") and tool results, with no `tools` in the
// request, and the extra null fields of the openai client's model_dump().
#include <gtest/gtest.h>

#include "server/api_error.h"
#include "server/openai/openai_request.h"
#include "server/tools/tool_prompt.h"

namespace tokenmill::server {
namespace {

// The turns a template without tool support renders (tool_prompt.h).
std::vector<tokenizer::ChatMessage> history_turns(const ChatRequest& r) {
  return template_messages(r.conversation.messages, r.conversation.tool_request);
}
std::vector<tokenizer::ChatMessage> history_turns(const TokenizeRequest& r) {
  return template_messages(r.conversation.messages, ToolsRequest{});
}

const ParseLimits kHistoryLimits{/*n_vocab=*/1000, /*json=*/{}};

constexpr const char* kToolHistory = R"({"messages": [
  {"role": "user", "content": "weather in Paris?"},
  {"role": "assistant", "content": null, "refusal": null, "annotations": null, "audio": null,
   "function_call": null,
   "tool_calls": [{"id": "call_1", "type": "function",
                   "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
  {"role": "tool", "tool_call_id": "call_1", "content": "sunny, 21 C"},
  {"role": "user", "content": "and tomorrow?"}]})";

TEST(ChatHistory, ToolCallsAndResultsWithoutToolsRenderAsText) {
  const ChatRequest r = parse_chat_request(kToolHistory, kHistoryLimits);
  EXPECT_FALSE(r.conversation.tool_request.active());
  ASSERT_EQ(history_turns(r).size(), 3u);  // user, assistant (the call), user (the result + the question)
  EXPECT_EQ(history_turns(r)[0].role, "user");
  EXPECT_EQ(history_turns(r)[1].role, "assistant");
  EXPECT_NE(history_turns(r)[1].content.find("\"name\": \"get_weather\""), std::string::npos)
      << history_turns(r)[1].content;
  EXPECT_NE(history_turns(r)[1].content.find("\"city\": \"Paris\""), std::string::npos) << history_turns(r)[1].content;
  EXPECT_EQ(history_turns(r)[2].role, "user");
  EXPECT_NE(history_turns(r)[2].content.find("sunny, 21 C"), std::string::npos) << history_turns(r)[2].content;
  EXPECT_NE(history_turns(r)[2].content.find("and tomorrow?"), std::string::npos) << history_turns(r)[2].content;
}

void expect_history_400(const std::string& body, const std::string& param, const std::string& needle) {
  try {
    parse_chat_request(body, kHistoryLimits);
    ADD_FAILURE() << "no error; expected one about " << param;
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    EXPECT_EQ(e.param().value_or("<none>"), param) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(ChatHistory, AudioAndDeprecatedFunctionCallsAreRefusedByName) {
  expect_history_400(R"({"messages": [{"role": "user", "content": "x"},
      {"role": "assistant", "content": "y", "audio": {"id": "a1"}}]})",
                     "messages[1].audio", "not supported");
  expect_history_400(R"({"messages": [{"role": "user", "content": "x"},
      {"role": "assistant", "content": null, "function_call": {"name": "f", "arguments": "{}"}}]})",
                     "messages[1].function_call", "tool_calls");
}

}  // namespace
}  // namespace tokenmill::server
