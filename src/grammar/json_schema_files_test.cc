// The schemas in tests/data/schemas (sampled from a real model by the Python
// tests) and tests/data/schemas/recursive (kept apart: a sampled base model
// recurses until max_tokens): each converts, its grammar parses, and it
// accepts a valid instance and rejects an invalid one.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "grammar/json_schema_test_util.h"

namespace tokenmill::grammar {
namespace {

struct Example {
  const char* valid;
  const char* invalid;
};

const std::map<std::string, Example>& examples() {
  static const std::map<std::string, Example> m = {
      {"01_person", {R"({"name":"Ada","age":36,"email":"ada@example.com"})", R"({"name":"Ada","age":121})"}},
      {"02_optional_fields", {R"({"active":true,"score":99.5})", R"({"score":100.5})"}},
      {"03_product_strict",
       {R"({"sku":"ABC-1234","price":9.99,"in_stock":false})", R"({"sku":"AB-1234","price":1,"in_stock":true})"}},
      {"04_array_bounds", {"[1, 2, 99]", "[]"}},
      {"05_string_enum", {R"("grey")", R"("gre")"}},
      {"06_const_values", {R"({"version":"1.0","kind":42,"ok":true})", R"({"version":"1.0","kind":41,"ok":true})"}},
      {"07_pattern_anchored", {R"("abc_12")", R"("ab_12")"}},
      {"08_pattern_alternatives",
       {R"({"address":"me@example.com","code":"none"})", R"({"address":"me@example.org","code":"DE-123"})"}},
      {"09_string_lengths", {R"({"short":"abc","exact":"abcd"})", R"({"short":"ab","exact":"abcd"})"}},
      {"10_format_date",
       {R"({"start":"2024-01-31","end":"2024-04-30"})", R"({"start":"2024-02-30","end":"2024-04-30"})"}},
      {"11_format_time", {R"("08:15:00Z")", R"("08:15")"}},
      {"12_format_date_time", {R"({"created_at":"2024-05-06T07:08:09+02:00"})", R"({"created_at":"2024-05-06"})"}},
      {"13_format_uuid", {R"("123e4567-e89b-12d3-a456-426614174000")", R"("123e4567")"}},
      {"14_format_email_list", {R"(["a@b.co","x.y@z.org"])", R"(["not-an-email"])"}},
      {"15_integer_range", {"-50", "51"}},
      {"16_integer_exclusive", {R"({"count":999,"offset":-7})", R"({"count":0,"offset":0})"}},
      {"17_number_range", {R"({"temperature":-1.5,"ratio":0.25})", R"({"temperature":0,"ratio":1})"}},
      {"18_boolean_null", {R"({"flag":false,"nothing":null})", R"({"flag":null,"nothing":null})"}},
      {"19_type_array", {R"({"label":null,"value":true})", R"({"label":"much too long","value":1})"}},
      {"20_any_of", {R"([1,"abc",null])", "[10]"}},
      {"21_one_of_tagged", {R"({"shape":"rect","w":2,"h":3})", R"({"shape":"circle","w":2,"h":3})"}},
      {"recursive/01_linked_list",
       {R"({"value":1,"next":{"value":2,"next":{"value":3}}})", R"({"value":1,"next":{}})"}},
      {"recursive/02_tree",
       {R"({"root":{"name":"a","children":[{"name":"b"},{"name":"c","children":[]}]}})",
        R"({"root":{"name":"a","children":[{"name":"b"},{"name":"c"},{"name":"d"}]}})"}},
      {"22_deep_nesting", {R"({"a":{"b":{"c":{"d":{"e":5}}}}})", R"({"a":{"b":{"c":{"d":{"e":6}}}}})"}},
      {"23_tool_call",
       {R"({"name":"get_weather","arguments":{"location":"Paris","unit":"celsius","days":3}})",
        R"({"name":"get_weather","arguments":{"unit":"celsius"}})"}},
      {"24_prefix_items", {R"([48.85, 2.35, "Paris"])", "[48.85]"}},
      {"25_all_of", {R"({"id":7,"tag":"x"})", R"({"tag":"x"})"}},
      {"26_enum_mixed", {R"({"x":[1,2]})", "2"}},
      {"27_definitions_ref",
       {R"({"from":{"x":1,"y":2},"to":{"x":-10,"y":10}})", R"({"from":{"x":1,"y":2},"to":{"x":11,"y":0}})"}},
      {"28_unicode_and_escapes",
       {"{\"text\":\"caf\xc3\xa9\",\"mood\":\"quote\\\"d\"}", R"({"text":"a","mood":"quote"})"}},
      {"29_format_ipv4", {R"({"host":"10.0.0.1","port":8080})", R"({"host":"10.0.0.256","port":8080})"}},
      {"30_defs_order",
       {R"({"ship_to":{"city":"Lyon","zip":"69001"},"lines":[{"sku":"AB123","qty":2}]})",
        R"({"ship_to":{"city":"Lyon","zip":"6900"},"lines":[{"sku":"AB123","qty":2}]})"}},
      {"recursive/03_comment_thread",
       {R"({"text":"hi","replies":[{"text":"a","replies":[{"text":"b"}]},{"text":"c"}]})",
        R"({"text":"hi","replies":[{"replies":[]}]})"}},
  };
  return m;
}

// The schemas of one folder, by name relative to tests/data/schemas.
void check_folder(const std::filesystem::path& root, const std::string& sub, size_t& num_files) {
  for (const auto& entry : std::filesystem::directory_iterator(root / sub)) {
    if (entry.path().extension() != ".json") continue;
    ++num_files;
    const std::string name = (sub.empty() ? "" : sub + "/") + entry.path().stem().string();
    SCOPED_TRACE(name);
    std::ifstream in(entry.path());
    std::stringstream text;
    text << in.rdbuf();
    auto it = examples().find(name);
    ASSERT_NE(it, examples().end()) << "no example for " << name;
    const auto lang = testing::schema_language(text.str());
    testing::expect_language(lang, {it->second.valid}, {it->second.invalid});
  }
}

TEST(JsonSchemaFiles, EverySchemaConvertsAndAcceptsItsExample) {
  const std::filesystem::path root = "tests/data/schemas";
  ASSERT_TRUE(std::filesystem::is_directory(root)) << "run from the repository root";
  size_t num_sampled = 0, num_recursive = 0;
  check_folder(root, "", num_sampled);
  check_folder(root, "recursive", num_recursive);
  EXPECT_EQ(num_sampled + num_recursive, examples().size());
  EXPECT_GE(num_sampled, 22u);  // the Python tests sample these from a model
}

}  // namespace
}  // namespace tokenmill::grammar
