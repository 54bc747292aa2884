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

grammar::Grammar compile(const ToolsRequest& tools, ToolCallFormat format = ToolCallFormat::kHermes) {
  const grammar::Deadline deadline(kGrammarLimits.max_compile_time);
  const std::string gbnf = tool_call_gbnf(tools, kGrammarLimits, deadline, format);
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

// One family's spelling of a list of calls (written out by hand, apart
// from the grammar's table).
struct FamilyWire {
  ToolCallFormat format;
  std::string (*list)(const std::vector<std::pair<std::string, std::string>>& calls);
};

std::string joined(const std::vector<std::pair<std::string, std::string>>& calls, const std::string& open,
                   const std::string& mid, const std::string& close, const std::string& sep) {
  std::string out;
  for (size_t i = 0; i < calls.size(); ++i)
    out += (i ? sep : "") + open + calls[i].first + mid + calls[i].second + close;
  return out;
}

const std::vector<FamilyWire> kFamilies = {
    {ToolCallFormat::kLlama3Json,
     [](const auto& c) { return joined(c, "{\"name\": \"", "\", \"parameters\": ", "}", "; "); }},
    {ToolCallFormat::kMistral,
     [](const auto& c) {
       return "[TOOL_CALLS][" + joined(c, "{\"name\": \"", "\", \"arguments\": ", "}", ", ") + "]";
     }},
    {ToolCallFormat::kGranite,
     [](const auto& c) {
       return "<|tool_call|>[" + joined(c, "{\"name\": \"", "\", \"arguments\": ", "}", ", ") + "]";
     }},
    {ToolCallFormat::kCommandR,
     [](const auto& c) {
       return "Action: ```json\n[" + joined(c, "{\"tool_name\": \"", "\", \"parameters\": ", "}", ", ") + "]\n```";
     }},
    {ToolCallFormat::kDeepSeekV3,
     [](const auto& c) {
       return "<｜tool▁calls▁begin｜>" +
              joined(c, "<｜tool▁call▁begin｜>function<｜tool▁sep｜>", "\n```json\n", "\n```<｜tool▁call▁end｜>",
                     "\n") +
              "<｜tool▁calls▁end｜>";
     }},
    {ToolCallFormat::kGptOss,
     [](const auto& c) {
       return joined(c, "<|channel|>commentary to=functions.", " <|constrain|>json<|message|>", "<|call|>", "");
     }},
    {ToolCallFormat::kFunctionary, [](const auto& c) { return joined(c, "<function=", ">", "</function>", ""); }},
    {ToolCallFormat::kQwen3Coder,
     [](const auto& c) {
       return joined(c, "<tool_call>\n{\"name\": \"", "\", \"arguments\": ", "}\n</tool_call>", "\n");
     }},
};

TEST(ToolGrammar, EachFamilyWritesItsFormat) {
  const std::pair<std::string, std::string> weather{"get_weather", "{\"city\": \"Paris\"}"};
  const std::pair<std::string, std::string> time{"get_time", "{}"};
  for (const FamilyWire& f : kFamilies) {
    SCOPED_TRACE(tool_call_format_name(f.format));
    const grammar::Grammar g = compile(weather_and_time(ToolChoiceMode::kRequired), f.format);
    const std::string two = f.list({weather, time});
    EXPECT_TRUE(grammar::grammar_accepts(g, f.list({weather}))) << f.list({weather});
    EXPECT_TRUE(grammar::grammar_accepts(g, two)) << two;
    EXPECT_FALSE(grammar::grammar_accepts(g, f.list({{"get_weather", "{\"city\": 5}"}})));
    EXPECT_FALSE(grammar::grammar_accepts(g, f.list({{"get_nothing", "{}"}})));
    EXPECT_FALSE(grammar::grammar_accepts(g, f.list({weather}) + "x"));
    // What it admits parses back with the family's parser.
    const ParsedChoice p = parse_tool_calls(two, f.format);
    ASSERT_EQ(p.calls.size(), 2u);
    EXPECT_EQ(p.calls[0].name, "get_weather");
    EXPECT_EQ(json::parse(p.calls[0].arguments), json::parse(weather.second));
    EXPECT_EQ(p.calls[1].name, "get_time");
    EXPECT_EQ(p.content, "");
    // Named: that function only, once.
    const grammar::Grammar named = compile(weather_and_time(ToolChoiceMode::kNamed), f.format);
    EXPECT_TRUE(grammar::grammar_accepts(named, f.list({time})));
    EXPECT_FALSE(grammar::grammar_accepts(named, f.list({weather})));
    // Auto: text that cannot begin a call, or calls.
    const grammar::Grammar autog = compile(weather_and_time(ToolChoiceMode::kAuto), f.format);
    EXPECT_TRUE(grammar::grammar_accepts(autog, "It is sunny."));
    EXPECT_TRUE(grammar::grammar_accepts(autog, two));
    EXPECT_FALSE(grammar::grammar_accepts(autog, two.substr(0, 1) + "junk"));
  }
}

}  // namespace
}  // namespace tokenmill::server
