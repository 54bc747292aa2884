// Tool-call output parsing (whole and streamed) and the streamed deltas'
// JSON.
#include "server/tools/tool_call_parser.h"

#include <gtest/gtest.h>

#include "server/openai/openai_response.h"

namespace tokenmill::server {
namespace {

const std::string kCall1 =
    "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";
const std::string kCall2 = "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>";

// Feeds `text` in pieces of `step` bytes and merges every delta, checking
// the streaming contract on the way: a call's first delta carries its name,
// indexes only grow.
ParsedChoice parse_streamed(const std::string& text, size_t step) {
  ToolCallParser parser;
  ParsedChoice out;
  auto take = [&](ParsedOutput&& piece) {
    out.content += piece.content;
    for (ToolCallDelta& d : piece.calls) {
      if (!d.name.empty()) {
        EXPECT_EQ(static_cast<size_t>(d.index), out.calls.size());
        out.calls.push_back({d.name, ""});
      }
      EXPECT_EQ(static_cast<size_t>(d.index) + 1, out.calls.size());
      out.calls.back().arguments += d.arguments;
    }
  };
  for (size_t i = 0; i < text.size(); i += step) take(parser.feed(text.substr(i, step)));
  take(parser.finish());
  return out;
}

void expect_same_every_split(const std::string& text) {
  const ParsedChoice whole = parse_tool_calls(text);
  for (size_t step = 1; step <= 7; ++step) {
    const ParsedChoice s = parse_streamed(text, step);
    EXPECT_EQ(s.content, whole.content) << "step " << step;
    ASSERT_EQ(s.calls.size(), whole.calls.size()) << "step " << step;
    for (size_t i = 0; i < s.calls.size(); ++i) {
      EXPECT_EQ(s.calls[i].name, whole.calls[i].name);
      EXPECT_EQ(s.calls[i].arguments, whole.calls[i].arguments) << "step " << step;
    }
  }
}

TEST(ToolCallParser, OneCall) {
  const ParsedChoice p = parse_tool_calls(kCall1);
  EXPECT_EQ(p.content, "");
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.calls[0].name, "get_weather");
  EXPECT_EQ(p.calls[0].arguments, "{\"city\": \"Paris\"}");
  expect_same_every_split(kCall1);
}

TEST(ToolCallParser, ParallelCallsAndWhitespace) {
  const std::string text = "\n" + kCall1 + "\n" + kCall2 + "\n\n";
  const ParsedChoice p = parse_tool_calls(text);
  EXPECT_EQ(p.content, "");
  ASSERT_EQ(p.calls.size(), 2u);
  EXPECT_EQ(p.calls[1].name, "get_time");
  EXPECT_EQ(p.calls[1].arguments, "{}");
  expect_same_every_split(text);
}

TEST(ToolCallParser, TextBeforeAndAfter) {
  const std::string text = "Let me check.  \n" + kCall1 + "\nDone.";
  const ParsedChoice p = parse_tool_calls(text);
  EXPECT_EQ(p.content, "Let me check.Done.");
  ASSERT_EQ(p.calls.size(), 1u);
  expect_same_every_split(text);
}

TEST(ToolCallParser, PlainTextIsUnchanged) {
  for (const std::string text : {"Hello <b>world</b> a < b\n", "x <tool_", "ends with space ", "<", "{}}"}) {
    EXPECT_EQ(parse_tool_calls(text).content, text);
    EXPECT_TRUE(parse_tool_calls(text).calls.empty());
    expect_same_every_split(text);
  }
}

TEST(ToolCallParser, ArgumentsKeepInnerBracesAndStrings) {
  const std::string args = R"({"a": {"b": [1, {"c": "}\n</tool_call>"}]}, "d": "x} \" </tool_call>"})";
  const std::string text = "<tool_call>{\"name\":\"f\",\"arguments\":" + args + " }</tool_call>";
  const ParsedChoice p = parse_tool_calls(text);
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.calls[0].name, "f");
  EXPECT_EQ(p.calls[0].arguments, args);
  expect_same_every_split(text);
}

TEST(ToolCallParser, EscapedName) {
  const ParsedChoice p = parse_tool_calls("<tool_call>{\"name\": \"a\\u0062\", \"arguments\": 1}</tool_call>");
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.calls[0].name, "ab");
  EXPECT_EQ(p.calls[0].arguments, "1");
}

TEST(ToolCallParser, MalformedHeaderIsContent) {
  const std::string text = "<tool_call>\n{\"nom\": \"f\"}</tool_call>";
  const ParsedChoice p = parse_tool_calls(text);
  EXPECT_TRUE(p.calls.empty());
  EXPECT_EQ(p.content, text);
  expect_same_every_split(text);
}

TEST(ToolCallParser, CutShort) {
  // max_tokens inside the arguments: the call keeps what was written.
  const std::string args_cut = "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"city\": \"Pa";
  ParsedChoice p = parse_tool_calls(args_cut);
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.calls[0].arguments, "{\"city\": \"Pa");
  expect_same_every_split(args_cut);
  // Inside the closing tag: the arguments are complete.
  p = parse_tool_calls("<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_");
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.calls[0].arguments, "{}");
  // A scalar cut before the tag keeps what may be the wrapper's brace.
  p = parse_tool_calls("<tool_call>\n{\"name\": \"f\", \"arguments\": 12}");
  EXPECT_EQ(p.calls[0].arguments, "12}");
  // Inside the header: the call has no name yet and is dropped; call
  // syntax never surfaces as content.
  const std::string header_cut = "Hi " + kCall2 + "\n<tool_call>\n{\"name\": \"f";
  p = parse_tool_calls(header_cut);
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.content, "Hi");
  expect_same_every_split(header_cut);
}

TEST(ToolCallParser, HoldsBackPossibleTags) {
  ToolCallParser parser;
  EXPECT_EQ(parser.feed("Hi <tool").content, "Hi");  // " <tool" may begin a call
  EXPECT_EQ(parser.feed("box>").content, " <toolbox>");
  ParsedOutput header = parser.feed("<tool_call>\n{\"name\": \"f\", \"arguments\": ");
  ASSERT_EQ(header.calls.size(), 1u);
  EXPECT_EQ(header.calls[0].name, "f");
  EXPECT_EQ(header.calls[0].arguments, "");
  ParsedOutput a = parser.feed("{\"x\": {\"y\": \"}\"}");
  ASSERT_EQ(a.calls.size(), 1u);
  EXPECT_EQ(a.calls[0].arguments, "{\"x\": {\"y\": \"}\"}");  // open: nothing to hold
  ParsedOutput b = parser.feed("}}\n</tool");
  ASSERT_EQ(b.calls.size(), 1u);
  EXPECT_EQ(b.calls[0].arguments, "}");  // balanced: the rest is the wrapper
  EXPECT_TRUE(parser.feed("_call>").empty());
  EXPECT_EQ(parser.num_calls(), 1);
  EXPECT_TRUE(parser.finish().empty());
  // A scalar argument: the '}' that may be the wrapper's waits.
  ToolCallParser scalar;
  scalar.feed("<tool_call>{\"name\": \"f\", \"arguments\": 12");
  EXPECT_EQ(scalar.feed("}").calls.size(), 0u);
  ParsedOutput end = scalar.feed("</tool_call>");
  EXPECT_TRUE(end.calls.empty());
}

TEST(ToolDeltaJson, Shapes) {
  ParsedOutput piece;
  piece.content = "a";
  piece.calls = {{0, "f", "{\"x\""}, {1, "", ": 2}"}};
  const nlohmann::json d = tool_delta_json(piece, {"call_0", "call_1"});
  EXPECT_EQ(d["content"], "a");
  ASSERT_EQ(d["tool_calls"].size(), 2u);
  EXPECT_EQ(d["tool_calls"][0], nlohmann::json::parse(
                                    R"({"index": 0, "id": "call_0", "type": "function",
                                        "function": {"name": "f", "arguments": "{\"x\""}})"));
  EXPECT_EQ(d["tool_calls"][1], nlohmann::json::parse(R"({"index": 1, "function": {"arguments": ": 2}"}})"));
  EXPECT_TRUE(tool_delta_json(ParsedOutput{}, {}).empty());
  ParsedOutput thinking;
  thinking.reasoning = "hmm";
  EXPECT_EQ(tool_delta_json(thinking, {}), nlohmann::json::parse(R"({"reasoning_content": "hmm"})"));
  const nlohmann::json calls = tool_calls_json({{"f", "{}"}}, {"call_x"});
  EXPECT_EQ(calls, nlohmann::json::parse(
                       R"([{"id": "call_x", "type": "function", "function": {"name": "f", "arguments": "{}"}}])"));
}

TEST(ChatResponseJson, ToolCallsMessage) {
  ChoiceOutput c;
  c.finish_reason = "tool_calls";
  c.null_content = true;
  c.tool_calls = tool_calls_json({{"f", "{}"}}, {"call_x"});
  const nlohmann::json r = chat_response({"chatcmpl-1", 0, "m"}, {c}, nullptr, nullptr);
  const nlohmann::json& m = r["choices"][0]["message"];
  EXPECT_TRUE(m["content"].is_null());
  EXPECT_EQ(m["tool_calls"][0]["function"]["name"], "f");
  EXPECT_EQ(r["choices"][0]["finish_reason"], "tool_calls");
  ChoiceOutput plain;
  plain.text = "hi";
  EXPECT_FALSE(
      chat_response({"chatcmpl-1", 0, "m"}, {plain}, nullptr, nullptr)["choices"][0]["message"].contains("tool_calls"));
  EXPECT_FALSE(chat_response({"chatcmpl-1", 0, "m"}, {plain}, nullptr, nullptr)["choices"][0]["message"].contains(
      "reasoning_content"));
  plain.reasoning = "because";
  EXPECT_EQ(
      chat_response({"chatcmpl-1", 0, "m"}, {plain}, nullptr, nullptr)["choices"][0]["message"]["reasoning_content"],
      "because");
}

}  // namespace
}  // namespace tokenmill::server
