// The tool grammar of a reasoning model: a think span may come before the
// calls (or the output starts inside one the prompt opened).
#include "server/structured_output.h"

#include <gtest/gtest.h>

#include "grammar/gbnf_parser.h"
#include "grammar/text_match.h"

namespace tokenmill::server {
namespace {

const grammar::GrammarLimits kThinkLimits;

grammar::Grammar think_grammar(ToolChoiceMode mode, bool think_open) {
  ToolsRequest r;
  r.tools.push_back({"f", "", nlohmann::ordered_json::parse(R"({"type": "object", "properties": {},
                                                      "additionalProperties": false})"),
                     false});
  r.mode = mode;
  r.think_first = true;
  r.think_open = think_open;
  const grammar::Deadline deadline(kThinkLimits.max_compile_time);
  return grammar::parse_gbnf(tools_gbnf(r, kThinkLimits), kThinkLimits, deadline);
}

const std::string kCall = "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>";

TEST(ToolGrammarThink, AThinkSpanMayComeFirst) {
  const grammar::Grammar g = think_grammar(ToolChoiceMode::kRequired, false);
  EXPECT_TRUE(grammar::grammar_accepts(g, kCall));
  EXPECT_TRUE(grammar::grammar_accepts(g, "<think>\nweigh a < b\n</think>\n\n" + kCall));
  EXPECT_FALSE(grammar::grammar_accepts(g, "<think>\nno end" + kCall));
  EXPECT_FALSE(grammar::grammar_accepts(g, "<think>x</think>\n\nplain text"));  // required: a call must follow
  const grammar::Grammar a = think_grammar(ToolChoiceMode::kAuto, false);
  EXPECT_TRUE(grammar::grammar_accepts(a, "<think>x</think>\n\nplain text"));
}

TEST(ToolGrammarThink, InsideASpanThePromptOpened) {
  const grammar::Grammar g = think_grammar(ToolChoiceMode::kRequired, true);
  EXPECT_TRUE(grammar::grammar_accepts(g, "reasons\n</think>\n\n" + kCall));
  EXPECT_TRUE(grammar::grammar_accepts(g, "</think>" + kCall));
  EXPECT_FALSE(grammar::grammar_accepts(g, kCall));  // the span must be closed first
}

}  // namespace
}  // namespace tokenmill::server
