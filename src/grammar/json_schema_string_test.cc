// Strings (lengths, escapes, formats, patterns) and enum/const.
#include <gtest/gtest.h>

#include <string>

#include "grammar/json_schema.h"
#include "grammar/json_schema_test_util.h"

namespace tokenmill::grammar {
namespace {

using testing::expect_language;
using testing::schema_language;

TEST(JsonSchemaString, LengthCountsDecodedCodePoints) {
  const auto lang = schema_language(R"({"type": "string", "minLength": 2, "maxLength": 3})");
  expect_language(lang,
                  {R"("ab")", R"("abc")", "\"\xc3\xa9\xe4\xb8\xad\"", "\"\xf0\x9f\x98\x80\xf0\x9f\x98\x80\"",
                   R"("\n\t")", R"("a\u00e9b")", R"("\"\\/")"},
                  {R"("a")", R"("abcd")", "\"\xf0\x9f\x98\x80\"", R"("\n")", R"("ab\u00e9c")", R"("a\")"});
}

TEST(JsonSchemaString, EscapesAndControlCharacters) {
  const auto lang = schema_language(R"({"type": "string"})");
  expect_language(
      lang, {R"("")", R"("\b\f\n\r\t\/\\\"")", R"("\u0000\uFFFF\u00e9")"},
      {"\"a\nb\"", "\"\x01\"", R"("\x41")", R"("\u12")", R"("\ud83d\ude00")", R"("\uDC00")", R"("a)", R"("a"")"});
}

TEST(JsonSchemaString, DateIsARealCalendarDate) {
  const auto lang = schema_language(R"({"type": "string", "format": "date"})");
  expect_language(
      lang,
      {R"("2023-01-31")", R"("2023-02-28")", R"("2023-04-30")", R"("2023-12-31")", R"("0001-01-01")",
       R"("9999-11-30")"},
      {R"("2023-02-30")", R"("2023-02-29")", R"("2023-04-31")", R"("2023-06-31")", R"("2023-13-01")", R"("2023-00-10")",
       R"("2023-01-00")", R"("0000-01-01")", R"("2023-1-01")", R"("20230101")", R"("2023-01-32")"});
}

TEST(JsonSchemaString, TimeAndDateTimeFollowRfc3339) {
  const auto time = schema_language(R"({"type": "string", "format": "time"})");
  expect_language(time, {R"("00:00:00Z")", R"("23:59:59.123456+05:30")", R"("12:30:00-23:59")"},
                  {R"("24:00:00Z")", R"("12:60:00Z")", R"("12:00:60Z")", R"("12:00:00")", R"("12:00Z")",
                   R"("12:00:00+24:00")", R"("12:00:00.Z")"});
  const auto dt = schema_language(R"({"type": "string", "format": "date-time"})");
  expect_language(dt, {R"("2024-03-01T10:20:30Z")", R"("1999-12-31T23:59:59.5-01:00")"},
                  {R"("2024-02-30T10:20:30Z")", R"("2024-03-01 10:20:30Z")", R"("2024-03-01T10:20:30")"});
}

TEST(JsonSchemaString, UuidEmailIpv4) {
  const auto uuid = schema_language(R"({"type": "string", "format": "uuid"})");
  expect_language(uuid, {R"("123e4567-e89b-12d3-a456-426614174000")", R"("ABCDEF01-2345-6789-abcd-ef0123456789")"},
                  {R"("123e4567e89b12d3a456426614174000")", R"("123e4567-e89b-12d3-a456-42661417400g")",
                   R"("123e4567-e89b-12d3-a456-4266141740000")"});
  const auto email = schema_language(R"({"type": "string", "format": "email"})");
  expect_language(email, {R"("a@b.c")", R"("first.last+tag@mail.example.org")"},
                  {R"("ab.c")", R"("a@b")", R"("@b.c")", R"("a b@c.d")"});
  const auto ip = schema_language(R"({"type": "string", "format": "ipv4"})");
  expect_language(ip, {R"("0.0.0.0")", R"("255.255.255.255")", R"("192.168.1.20")"},
                  {R"("256.1.1.1")", R"("01.2.3.4")", R"("1.2.3")", R"("1.2.3.4.5")"});
}

TEST(JsonSchemaString, FormatWithFittingLengthBounds) {
  const auto lang = schema_language(R"({"type": "string", "format": "date", "minLength": 10, "maxLength": 10})");
  expect_language(lang, {R"("2020-05-05")"}, {R"("2020-05-5")"});
}

TEST(JsonSchemaString, PatternIsASearchUnlessAnchored) {
  const auto free = schema_language(R"({"type": "string", "pattern": "[0-9]{3}"})");
  expect_language(free, {R"("123")", R"("ab123cd")", R"("\n9999\"")"}, {R"("12")", R"("1a2b3")"});
  const auto anchored = schema_language(R"({"type": "string", "pattern": "^[a-z]+-[0-9]{2}$"})");
  expect_language(anchored, {R"("ab-12")"}, {R"("ab-123")", R"(" ab-12")", R"("ab-12 ")", R"("-12")"});
  const auto start = schema_language(R"({"type": "string", "pattern": "^id_"})");
  expect_language(start, {R"("id_")", R"("id_x y")"}, {R"("xid_")", R"("id")"});
  const auto alt = schema_language(R"({"type": "string", "pattern": "^a$|b$"})");
  expect_language(alt, {R"("a")", R"("b")", R"("xxb")"}, {R"("ab a")", R"("ba")"});
}

TEST(JsonSchemaString, PatternCharactersAreWrittenAsJsonEscapes) {
  const auto lang = schema_language(R"({"type": "string", "pattern": "^[\"\\\\]\\n\\t.$"})");
  expect_language(lang, {R"("\"\n\tx")", R"("\\\n\t\"")", R"("\"\n\t\u0001")"},
                  {R"("""\n\tx")", "\"\\\"\n\tx\"", R"("\"\n\t\n")"});
}

TEST(JsonSchemaString, PatternWithLengthBoundsThatItSatisfies) {
  const auto lang = schema_language(R"({"type": "string", "pattern": "^[a-z]{1,5}$", "maxLength": 5})");
  expect_language(lang, {R"("abcde")"}, {R"("abcdef")", R"("")"});
}

TEST(JsonSchemaEnum, AnyJsonValues) {
  const auto lang = schema_language(R"({"enum": ["red", "re", 1, 2.5, null, true, {"a": [1, "x"]}, [], "\u00e9\n"]})");
  expect_language(lang,
                  {R"("red")", R"("re")", "1", "2.5", "null", "true", R"({"a":[1,"x"]})", "[]", "\"\xc3\xa9\\n\""},
                  {R"("r")", R"("redd")", "2", "false", R"({"a":[1]})", "[1]", R"("\u00e9\n")", "{ \"a\":[1,\"x\"]}"});
}

TEST(JsonSchemaEnum, ConstAndTypeFilters) {
  const auto c = schema_language(R"({"const": {"k": "v"}})");
  expect_language(c, {R"({"k":"v"})"}, {R"({"k":"w"})", "{}"});
  const auto typed = schema_language(R"({"type": "string", "enum": ["a", 1, "bb", "ccc"], "maxLength": 2})");
  expect_language(typed, {R"("a")", R"("bb")"}, {"1", R"("ccc")"});
  const auto bounded = schema_language(R"({"enum": [1, 5, 10, "x"], "type": "integer", "exclusiveMaximum": 10})");
  expect_language(bounded, {"1", "5"}, {"10", R"("x")"});
}

TEST(JsonSchemaEnum, TenThousandValues) {
  std::string schema = R"({"type": "string", "enum": [)";
  for (int i = 0; i < 10000; ++i) schema += (i > 0 ? ",\"v" : "\"v") + std::to_string(i * 7) + "\"";
  const auto lang = schema_language(schema + "]}");
  expect_language(lang, {R"("v0")", R"("v7")", R"("v69993")", R"("v700")"},
                  {R"("v1")", R"("v69994")", R"("v70000")", R"("v")", R"("v00")"});
}

TEST(JsonSchemaEnum, UnicodeValues) {
  const auto lang =
      schema_language("{\"enum\": [\"\xe4\xb8\xad\xe6\x96\x87\", \"\xf0\x9f\x98\x80\", \"caf\xc3\xa9\"]}");
  expect_language(lang, {"\"\xe4\xb8\xad\xe6\x96\x87\"", "\"\xf0\x9f\x98\x80\"", "\"caf\xc3\xa9\""},
                  {"\"\xe4\xb8\xad\"", "\"cafe\"", R"("caf\u00e9")"});
}

}  // namespace
}  // namespace tokenmill::grammar
