#include "grammar/gbnf_parser.h"

#include <gtest/gtest.h>

#include <string>

#include "grammar/text_match.h"
#include "util/error.h"

namespace tokenmill::grammar {
namespace {

Grammar parse(const std::string& text, GrammarLimits limits = {}) {
  return parse_gbnf(text, limits, Deadline(limits.max_compile_time));
}

std::string error_of(const std::string& text, GrammarLimits limits = {}) {
  try {
    parse(text, limits);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(GbnfParser, LiteralsClassesAndAlternatives) {
  const Grammar g = parse(R"(root ::= "ab" [0-9] | "x" [^a-c]  # comment
)");
  EXPECT_TRUE(grammar_accepts(g, "ab7"));
  EXPECT_TRUE(grammar_accepts(g, "xz"));
  EXPECT_TRUE(grammar_accepts(g, "x\xc3\xa9"));  // é
  EXPECT_FALSE(grammar_accepts(g, "xb"));
  EXPECT_FALSE(grammar_accepts(g, "ab"));
  EXPECT_FALSE(grammar_accepts(g, "ab77"));
  EXPECT_FALSE(grammar_accepts(g, ""));
}

TEST(GbnfParser, RepetitionCounts) {
  const Grammar g = parse(R"(root ::= "a"{2,4} "b"* ("c" "d")+ "e"?)");
  EXPECT_TRUE(grammar_accepts(g, "aacd"));
  EXPECT_TRUE(grammar_accepts(g, "aaaabbbcdcde"));
  EXPECT_FALSE(grammar_accepts(g, "acd"));
  EXPECT_FALSE(grammar_accepts(g, "aaaaacd"));
  EXPECT_FALSE(grammar_accepts(g, "aab"));
  EXPECT_FALSE(grammar_accepts(g, "aacdee"));
  const Grammar exact = parse(R"(root ::= [0-9]{3} ","{2,})");
  EXPECT_TRUE(grammar_accepts(exact, "123,,"));
  EXPECT_TRUE(grammar_accepts(exact, "123,,,,"));
  EXPECT_FALSE(grammar_accepts(exact, "12,,"));
  EXPECT_FALSE(grammar_accepts(exact, "123,"));
}

TEST(GbnfParser, RulesAcrossLinesRecursionAndEscapes) {
  const Grammar g = parse(R"(
root ::= value
value ::=
    "[" ws ( value ( "," ws value )* )? "]"
  | "\"" [^"\\\x00-\x1f]* "\""
  | "\u00e9\U0001F600"
ws ::= [ \t\n]?
)");
  EXPECT_TRUE(grammar_accepts(g, "[]"));
  EXPECT_TRUE(grammar_accepts(g, "[ [\"a b\"], \"\"]"));
  EXPECT_TRUE(grammar_accepts(g, "\xc3\xa9\xf0\x9f\x98\x80"));
  EXPECT_FALSE(grammar_accepts(g, "[\"a\"b\"]"));
  EXPECT_FALSE(grammar_accepts(g, "[[]"));
  EXPECT_FALSE(grammar_accepts(g, "\"\x01\""));
}

TEST(GbnfParser, DotMatchesAnyCodePointButNotInvalidUtf8) {
  const Grammar g = parse(R"(root ::= . .)");
  EXPECT_TRUE(grammar_accepts(g, "a\xe4\xb8\xad"));
  EXPECT_FALSE(grammar_accepts(g, "a\xe4\xb8"));      // truncated
  EXPECT_FALSE(grammar_accepts(g, "a\xc0\x80"));      // overlong
  EXPECT_FALSE(grammar_accepts(g, "a\xed\xa0\x80"));  // surrogate
}

TEST(GbnfParser, HelperRulesNeverClashWithRulesDefinedLater) {
  const Grammar g = parse("root ::= \"a\"* root-1 (\"c\")?\nroot-1 ::= \"b\"");
  EXPECT_TRUE(grammar_accepts(g, "aab"));
  EXPECT_TRUE(grammar_accepts(g, "bc"));
  EXPECT_FALSE(grammar_accepts(g, "ab b"));
}

TEST(GbnfParser, EmptyAlternativeAndNullableRoot) {
  const Grammar g = parse(R"(root ::= "a" | )");
  EXPECT_TRUE(grammar_accepts(g, ""));
  EXPECT_TRUE(grammar_accepts(g, "a"));
  EXPECT_FALSE(grammar_accepts(g, "aa"));
}

TEST(GbnfParser, RefusesWithReasons) {
  EXPECT_NE(error_of("root ::= \"a\" b").find("rule 'b'"), std::string::npos);
  EXPECT_NE(error_of("start ::= \"a\"").find("no 'root' rule"), std::string::npos);
  EXPECT_NE(error_of("root ::= \"a\"\nroot ::= \"b\"").find("defined twice"), std::string::npos);
  EXPECT_NE(error_of("root ::= root \"a\" | \"b\"").find("left recursion (root -> root)"), std::string::npos);
  EXPECT_NE(error_of("root ::= x \"a\"\nx ::= y\ny ::= \"\" root").find("left recursion"), std::string::npos);
  EXPECT_NE(error_of("root ::= (\"a\"?)*").find("empty string"), std::string::npos);
  EXPECT_NE(error_of("root ::= \"abc").find("unterminated string"), std::string::npos);
  EXPECT_NE(error_of("root ::= [z-a]").find("reversed"), std::string::npos);
  EXPECT_NE(error_of("root ::= \"a\"{3,2}").find("below the minimum"), std::string::npos);
  EXPECT_NE(error_of("root ::= \"\\q\"").find("unknown escape"), std::string::npos);
  EXPECT_NE(error_of("root ::= (\"a\"").find("')'"), std::string::npos);
  EXPECT_NE(error_of("root ::= \"\xff\"").find("invalid UTF-8"), std::string::npos);
  GrammarLimits small;
  small.max_repetition = 10;
  EXPECT_NE(error_of("root ::= \"a\"{0,11}", small).find("limit of 10"), std::string::npos);
  small.max_rules = 5;
  EXPECT_NE(
      error_of("root ::= a b c d e f\na ::= \"a\"\nb ::= \"a\"\nc ::= \"a\"\nd ::= \"a\"\ne ::= \"a\"\nf ::= \"a\"",
               small)
          .find("more than 5 rules"),
      std::string::npos);
}

TEST(GbnfParser, LargeBoundedRepetitionStaysLinear) {
  const Grammar g = parse(R"(root ::= [a-z]{0,5000} "!")");
  EXPECT_LT(g.num_rules(), 5100u);
  EXPECT_TRUE(grammar_accepts(g, std::string(5000, 'q') + "!"));
  EXPECT_FALSE(grammar_accepts(g, std::string(5001, 'q') + "!"));
}

}  // namespace
}  // namespace tokenmill::grammar
