// Think spans: extraction, held-back partial tags, and that the streamed
// pieces (every split, random chunkings with a fixed seed) concatenate to
// the whole parse.
#include "server/reasoning_parser.h"

#include <gtest/gtest.h>

#include <random>

namespace tokenmill::server {
namespace {

ReasoningDelta parse_pieces(const std::vector<std::string>& pieces, ReasoningFormat format, bool open) {
  ReasoningParser parser(format, open);
  ReasoningDelta out;
  for (const std::string& p : pieces) {
    ReasoningDelta d = parser.feed(p);
    out.reasoning += d.reasoning;
    out.content += d.content;
  }
  ReasoningDelta d = parser.finish();
  out.reasoning += d.reasoning;
  out.content += d.content;
  return out;
}

void expect_same_every_split(const std::string& text, ReasoningFormat format, bool open) {
  const ReasoningDelta whole = parse_reasoning(text, format, open);
  std::vector<std::vector<std::string>> splits;
  for (size_t step = 1; step <= 7; ++step) {
    splits.emplace_back();
    for (size_t i = 0; i < text.size(); i += step) splits.back().push_back(text.substr(i, step));
  }
  std::mt19937 rng(99);
  for (int round = 0; round < 20; ++round) {
    splits.emplace_back();
    for (size_t i = 0; i < text.size();) {
      const size_t n = std::uniform_int_distribution<size_t>(0, 9)(rng);
      splits.back().push_back(text.substr(i, n));
      i += n;
    }
  }
  for (const auto& pieces : splits) {
    const ReasoningDelta s = parse_pieces(pieces, format, open);
    EXPECT_EQ(s.reasoning, whole.reasoning) << text;
    EXPECT_EQ(s.content, whole.content) << text;
  }
}

void expect_parse(const std::string& text, bool open, const std::string& reasoning, const std::string& content,
                  ReasoningFormat format = ReasoningFormat::kDeepSeek) {
  const ReasoningDelta d = parse_reasoning(text, format, open);
  EXPECT_EQ(d.reasoning, reasoning) << text;
  EXPECT_EQ(d.content, content) << text;
  expect_same_every_split(text, format, open);
}

TEST(ReasoningParser, ThinkSpanAtTheStart) {
  expect_parse("<think>\nLet me add.\n</think>\n\nIt is 4.", false, "Let me add.", "It is 4.");
  expect_parse("\n <think>a < b </thinking> c</think>d", false, "a < b </thinking> c", "d");
}

TEST(ReasoningParser, PromptOpenedThink) {
  expect_parse("Let me add.\n</think>\n\nIt is 4.", true, "Let me add.", "It is 4.");
  expect_parse("</think>Answer", true, "", "Answer");
  expect_parse("<think>\nAgain.</think>Answer", true, "Again.", "Answer");  // a repeated <think>
  expect_parse("\n<thi", true, "<thi", "");
}

TEST(ReasoningParser, NoThink) {
  expect_parse("Just an answer <think>not this</think>", false, "", "Just an answer <think>not this</think>");
  expect_parse("  <thin", false, "", "  <thin");
  expect_parse("", false, "", "");
}

TEST(ReasoningParser, UnclosedThinkIsAllReasoning) {
  expect_parse("<think>\nStill thinking </thi", false, "Still thinking </thi", "");
  expect_parse("thinking on and on  \n", true, "thinking on and on", "");
}

TEST(ReasoningParser, NoneLeavesTheText) {
  expect_parse("<think>x</think>y", false, "", "<think>x</think>y", ReasoningFormat::kNone);
}

TEST(ReasoningParser, TagsSplitAcrossPieces) {
  ReasoningParser p(ReasoningFormat::kDeepSeek, false);
  EXPECT_TRUE(p.feed("<thi").empty());
  EXPECT_TRUE(p.feed("nk>\n").empty());
  EXPECT_EQ(p.feed("abc </").reasoning, "abc");
  EXPECT_TRUE(p.feed("think").empty());
  const ReasoningDelta d = p.feed(">\n\nhi");
  EXPECT_EQ(d.reasoning, "");
  EXPECT_EQ(d.content, "hi");
  EXPECT_TRUE(p.finish().empty());
}

TEST(ReasoningParser, TemplateHelpers) {
  EXPECT_TRUE(template_opens_think("<|im_start|>assistant\n<think>\n"));
  EXPECT_TRUE(template_opens_think("...<｜Assistant｜><think>"));
  EXPECT_FALSE(template_opens_think("<|im_start|>assistant\n"));
  EXPECT_FALSE(template_opens_think("<think>\n</think>\n\n"));
  EXPECT_EQ(resolve_reasoning_format(ReasoningFormat::kAuto, "{{ '<think>\\n' }}"), ReasoningFormat::kDeepSeek);
  EXPECT_EQ(resolve_reasoning_format(ReasoningFormat::kAuto, "{{ messages }}"), ReasoningFormat::kNone);
  EXPECT_EQ(resolve_reasoning_format(ReasoningFormat::kNone, "<think>"), ReasoningFormat::kNone);
}

}  // namespace
}  // namespace tokenmill::server
