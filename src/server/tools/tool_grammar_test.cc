// The tool grammar: which outputs each tool_choice admits (checked with the
// grammar library's whole-text matcher), and that what it admits parses
// back into the calls.
#include "server/tools/tool_grammar.h"

#include <gtest/gtest.h>

#include "grammar/gbnf_parser.h"
#include "grammar/text_match.h"
#include "server/tools/tool_call_parser.h"
#include "util/error.h"

namespace tokenmill::server {
namespace {

using nlohmann::json;

const grammar::GrammarLimits kGrammarLimits;

ToolsRequest weather_and_time(ToolChoiceMode mode, bool parallel = true) {
  ToolsRequest r;
  r.tools.push_back({"get_weather", "", json::parse(R"({"type": "object", "properties": {"city": {"type": "string"}},
                                     "required": ["city"], "additionalProperties": false})"),
                     true});
  r.tools.push_back(
      {"get_time", "", json::parse(R"({"type": "object", "properties": {}, "additionalProperties": false})"), false});
  r.mode = mode;
  r.parallel = parallel;
  if (mode == ToolChoiceMode::kNamed) r.named = "get_time";
  return r;
}

grammar::Grammar compile(const ToolsRequest& tools) {
  const grammar::Deadline deadline(kGrammarLimits.max_compile_time);
  const std::string gbnf = tool_call_gbnf(tools, kGrammarLimits, deadline);
  return grammar::parse_gbnf(gbnf, kGrammarLimits, deadline);
}

const std::string kWeather =
    "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";
const std::string kTime = "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>";

TEST(ToolGrammar, Required) {
  const grammar::Grammar g = compile(weather_and_time(ToolChoiceMode::kRequired));
  EXPECT_TRUE(grammar::grammar_accepts(g, kWeather));
  EXPECT_TRUE(grammar::grammar_accepts(g, kWeather + "\n" + kTime));
  EXPECT_FALSE(grammar::grammar_accepts(g, ""));
  EXPECT_FALSE(grammar::grammar_accepts(g, "Hello"));
  // The arguments follow the function's schema.
  EXPECT_FALSE(grammar::grammar_accepts(
      g, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {}}\n</tool_call>"));  // city is required
  EXPECT_FALSE(grammar::grammar_accepts(
      g, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": 5}}\n</tool_call>"));
  EXPECT_FALSE(
      grammar::grammar_accepts(g, "<tool_call>\n{\"name\": \"get_nothing\", \"arguments\": {}}\n</tool_call>"));
  // What it admits parses back.
  const ParsedChoice p = parse_tool_calls(kWeather + "\n" + kTime);
  ASSERT_EQ(p.calls.size(), 2u);
  EXPECT_EQ(json::parse(p.calls[0].arguments), json::parse(R"({"city": "Paris"})"));
  EXPECT_EQ(p.calls[1].name, "get_time");
}

TEST(ToolGrammar, RequiredWithoutParallelCalls) {
  const grammar::Grammar g = compile(weather_and_time(ToolChoiceMode::kRequired, /*parallel=*/false));
  EXPECT_TRUE(grammar::grammar_accepts(g, kWeather));
  EXPECT_TRUE(grammar::grammar_accepts(g, kTime));
  EXPECT_FALSE(grammar::grammar_accepts(g, kWeather + "\n" + kTime));
}

TEST(ToolGrammar, NamedFunction) {
  const grammar::Grammar g = compile(weather_and_time(ToolChoiceMode::kNamed));
  EXPECT_TRUE(grammar::grammar_accepts(g, kTime));
  EXPECT_FALSE(grammar::grammar_accepts(g, kWeather));
  EXPECT_FALSE(grammar::grammar_accepts(g, kTime + "\n" + kTime));
}

TEST(ToolGrammar, AutoAllowsTextThatCannotBeginACall) {
  const grammar::Grammar g = compile(weather_and_time(ToolChoiceMode::kAuto));
  EXPECT_TRUE(grammar::grammar_accepts(g, kWeather));
  EXPECT_TRUE(grammar::grammar_accepts(g, kTime + "\n" + kWeather));
  EXPECT_TRUE(grammar::grammar_accepts(g, "It is sunny.\nAnything <goes> after the first character."));
  EXPECT_FALSE(grammar::grammar_accepts(g, "<b>bold</b>"));
  EXPECT_FALSE(grammar::grammar_accepts(g, " leading space"));
  EXPECT_FALSE(grammar::grammar_accepts(g, ""));
}

TEST(ToolGrammar, UnsupportedSchemaNamesTheFunction) {
  ToolsRequest r = weather_and_time(ToolChoiceMode::kRequired);
  r.tools[1].parameters = json::parse(R"({"type": "object", "patternProperties": {"^a": {"type": "string"}}})");
  try {
    compile(r);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("function 'get_time'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("patternProperties"), std::string::npos) << e.what();
  }
  // A named choice compiles only the named function's schema.
  r.mode = ToolChoiceMode::kNamed;
  r.named = "get_weather";
  EXPECT_NO_THROW(compile(r));
}

}  // namespace
}  // namespace tokenmill::server
