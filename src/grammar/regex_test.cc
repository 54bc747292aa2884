// Regex -> GBNF: the language of each expression (full match), the JSON
// string mode and search semantics that JSON Schema `pattern` uses, and
// the constructs refused.
#include "grammar/regex.h"

#include <gtest/gtest.h>

#include <string>

#include "grammar/json_schema_test_util.h"

namespace tokenmill::grammar {
namespace {

using testing::contains;
using testing::expect_language;
using testing::regex_error;
using testing::regex_language;

TEST(Regex, LiteralsEscapesAndClasses) {
  expect_language(regex_language(R"(a\.b\\c\x41\u00e9\t)"), {"a.b\\cA\xc3\xa9\t"}, {"axb\\cA\xc3\xa9\t", "a.b\\cA"});
  expect_language(regex_language("[a-c_0-9-]+"), {"a", "c_9-", "-"}, {"", "d", "A"});
  expect_language(regex_language("[^a-c\\n]"), {"d", "\xe4\xb8\xad", " "}, {"a", "\n", "", "dd"});
  expect_language(regex_language(R"([\]\[\^\\])"), {"]", "[", "^", "\\"}, {"a"});
  expect_language(regex_language(R"(\d\w\s)"), {"0a ", "9_\t"}, {"a0 ", "00x", "0a\xc2\xa0"});
}

TEST(Regex, NegatedEscapesMeanWhatEveryEngineAgreesOn) {
  // Python's \D and \W exclude non-ASCII digits and letters, so outside
  // ASCII only \S (which excludes every Unicode space) matches.
  expect_language(regex_language(R"(\D\W\S)"), {"a-x", " .\xc3\xa9"}, {"1-x", "aax", "a-\xc2\xa0", "a\xc3\xa9x"});
  expect_language(regex_language(R"([^\d])"), {"a"}, {"5", "\xd9\xa3"});
  expect_language(regex_language(R"([^\s])"), {"a", "\xc3\xa9"}, {" ", "\xe2\x80\xa8", "\xc2\xa0"});
  expect_language(regex_language("."), {"a", "\xf0\x9f\x98\x80"}, {"\n", "\r", "\xe2\x80\xa8", ""});
}

TEST(Regex, QuantifiersAndLazyVariants) {
  expect_language(regex_language("ab*c+d?"), {"ac", "abbccd", "acc"}, {"ab", "abd", "acdd"});
  expect_language(regex_language("x{3}y{2,}z{1,2}"), {"xxxyyz", "xxxyyyyzz"}, {"xxyyz", "xxxyz", "xxxyyzzz"});
  expect_language(regex_language("a+?b*?c??d{1,2}?"), {"ad", "aabbcdd"}, {"d", "acc"});
  expect_language(regex_language("(ab){0,2}"), {"", "ab", "abab"}, {"a", "ababab"});
}

TEST(Regex, RepeatedNullableGroupsKeepTheirLanguage) {
  expect_language(regex_language("(a*)*"), {"", "a", "aaaa"}, {"b"});
  expect_language(regex_language("(a|)+b"), {"b", "ab", "aaab"}, {"a", "bb"});
  expect_language(regex_language("(a?b?)*c"), {"c", "abc", "bac", "aabbc"}, {"", "cc"});
  expect_language(regex_language("(a*b*){2,3}"), {"", "ab", "ba", "abab", "babab"}, {"c", "bababa"});
  expect_language(regex_language("(()|x)*y"), {"y", "xxy"}, {"xx"});
}

TEST(Regex, AlternationAndGroups) {
  expect_language(regex_language("cat|car|dog|ca"), {"cat", "car", "dog", "ca"}, {"c", "cats", "do"});
  expect_language(regex_language("(?:red|green)-(\\d+|x)"), {"red-1", "green-x", "red-42"}, {"red-", "blue-1"});
  expect_language(regex_language("a(|b)c"), {"ac", "abc"}, {"abbc"});
}

TEST(Regex, AnchorsAtTheEndsChangeNothingInFullMatch) {
  expect_language(regex_language("^abc$"), {"abc"}, {"xabc", "abcx"});
  expect_language(regex_language("^a|b$"), {"a", "b"}, {"ab"});
}

TEST(Regex, UnicodeLiteralsAndRanges) {
  expect_language(regex_language("\xe4\xb8\xad+[\xc3\xa0-\xc3\xbf]"),
                  {"\xe4\xb8\xad\xc3\xa9", "\xe4\xb8\xad\xe4\xb8\xad\xc3\xa0"},
                  {"\xe4\xb8\xad"
                   "e",
                   "\xc3\xa9"});
  expect_language(regex_language("[\\u4e00-\\u9fff]{2}"), {"\xe4\xb8\xad\xe6\x96\x87"}, {"\xe4\xb8\xad", "ab"});
}

TEST(Regex, JsonStringModeEscapesWhatJsonMustEscape) {
  RegexOptions json;
  json.json_string = true;
  expect_language(regex_language(R"(a"b\\c\nd)", json), {R"(a\"b\\c\nd)"}, {"a\"b\\c\nd", R"(a\"b\\c\u000ad)"});
  expect_language(regex_language("[\\x00-\\x1f\"]", json), {"\\u0000", "\\b", "\\n", "\\u001f", "\\\""},
                  {"\x01", "\"", "\\u0008"});
  expect_language(regex_language(".{2}", json), {"ab", "\\\"\\\\", "\\t\xc3\xa9"}, {"\\n\\n", "\"a", "a\\"});
}

TEST(Regex, SearchModeAllowsTextAroundUnanchoredEnds) {
  RegexOptions search;
  search.search = true;
  expect_language(regex_language("b+c", search), {"bc", "abbcd", "xxbc"}, {"b", "c", "cb"});
  expect_language(regex_language("^b", search), {"b", "bxx"}, {"ab"});
  expect_language(regex_language("b$", search), {"b", "xxb"}, {"ba"});
  expect_language(regex_language("x*", search), {"", "anything"}, {});
  RegexOptions both = search;
  both.json_string = true;
  expect_language(regex_language("a", both), {"a", "\\\"a\\n"}, {"\"a", "b"});
}

TEST(Regex, LengthRange) {
  const Deadline deadline(testing::kTestBudget);
  const RegexOptions full;
  RegexOptions search;
  search.search = true;
  auto range = [&](const char* re, const RegexOptions& o) { return regex_length_range(re, {}, deadline, o); };
  EXPECT_EQ(range("a{2,5}b?", full).min, 2);
  EXPECT_EQ(range("a{2,5}b?", full).max, 6);
  EXPECT_EQ(range("x|yyy", full).min, 1);
  EXPECT_EQ(range("x|yyy", full).max, 3);
  EXPECT_EQ(range("a+", full).max, -1);
  EXPECT_EQ(range("^ab$", search).max, 2);
  EXPECT_EQ(range("^ab", search).max, -1);
}

TEST(Regex, RefusedConstructsAreNamedWithTheirOffset) {
  const std::pair<const char*, const char*> cases[] = {
      {R"((a)\1)", "backreferences are not supported at offset 3"},
      {"(?=a)", "lookahead"},
      {"(?<=a)b", "lookbehind"},
      {"(?<name>a)", "named groups"},
      {"(?P<name>a)", "named groups"},
      {"(?i)a", "inline flags"},
      {R"(\bword)", "word boundaries"},
      {R"(\p{L})", "escape \\p is not supported"},
      {"a{2", "not a quantifier"},
      {"a{,3}", "not a quantifier"},
      {"[]a]", "']' first in a class"},
      {"[a", "unterminated character class"},
      {"(a", "missing ')'"},
      {"a)", "unmatched ')'"},
      {"*a", "nothing to repeat"},
      {"a**", "multiple repeat"},
      {"a*+", "possessive"},
      {"a^b", "'^' is supported only at the start"},
      {"(a$)", "'$' is supported only at the end"},
      {"[z-a]", "bad character range"},
      {R"(\012)", "octal escapes"},
      {R"(\x4)", "expected 2 hex digits"},
      {"a{3,2}", "n < m"},
      {"\xff", "invalid UTF-8"},
  };
  for (const auto& [re, expected] : cases) EXPECT_TRUE(contains(regex_error(re), expected)) << re;
}

TEST(Regex, Limits) {
  GrammarLimits limits;
  limits.max_repetition = 100;
  EXPECT_TRUE(contains(regex_error("a{101}", {}, limits), "max_repetition (100)"));
  EXPECT_TRUE(contains(regex_error(std::string(70, '(') + std::string(70, ')')), "nested deeper than 64"));
  limits = {};
  limits.max_gbnf_bytes = 100;
  EXPECT_TRUE(contains(regex_error(std::string(200, 'a') + "|b", {}, limits), "max_gbnf_bytes (100"));
  limits = {};
  limits.max_source_bytes = 10;
  EXPECT_TRUE(contains(regex_error("aaaaaaaaaaaa", {}, limits), "max_source_bytes"));
}

TEST(Regex, RulesUseTheGivenName) {
  const Deadline deadline(testing::kTestBudget);
  const std::string rules = regex_rules("[0-9]+", "digits", {}, deadline);
  const auto lang = testing::gbnf_language("root ::= \"#\" digits\n" + rules);
  expect_language(lang, {"#12"}, {"12", "#"});
}

}  // namespace
}  // namespace tokenmill::grammar
