// Objects, arrays, combinators and references: the language of each
// schema, checked on texts at the edges of what it allows.
#include "grammar/json_schema.h"

#include <gtest/gtest.h>

#include <string>

#include "grammar/json_schema_test_util.h"

namespace tokenmill::grammar {
namespace {

using testing::expect_language;
using testing::schema_language;

TEST(JsonSchema, ObjectRequiredAndOptionalPropertiesInDeclaredOrder) {
  const auto lang = schema_language(R"({"type": "object", "properties": {
      "name": {"type": "string"}, "age": {"type": "integer"}, "tags": {"type": "boolean"}},
      "required": ["age"]})");
  expect_language(lang,
                  {R"({"age":1})", R"({"name":"x","age":1})", R"({"age":1,"tags":true})",
                   R"({"name":"","age":-3,"tags":false})", "{ \"age\" : 7 ,\n\"tags\":true }"},
                  {"{}", R"({"name":"x"})", R"({"age":"1"})", R"({"age":1,"name":"x"})", R"({"age":1,"age":1})",
                   R"({"age":1,"other":1})", R"({"age":1,})", R"({,"age":1})", R"( {"age":1})", R"({"age":1} )"});
}

TEST(JsonSchema, WhitespaceIsBoundedAndNeverInsideTokens) {
  const auto lang = schema_language(R"({"type": "array", "items": {"type": "integer"}})");
  expect_language(lang, {"[]", "[    ]", "[1,2]", "[ 1 , 2 ]", "[\n\t1\n]"},
                  {"[     ]", "[1     ,2]", "[1 2]", "[ - 1]", "[1]\n"});
}

TEST(JsonSchema, AdditionalPropertiesFalseAllowsOnlyDeclared) {
  const auto lang = schema_language(R"({"type": "object", "properties": {"a": {"type": "null"}},
      "additionalProperties": false})");
  expect_language(lang, {"{}", R"({"a":null})"}, {R"({"b":null})", R"({"a":null,"b":1})"});
  const auto empty = schema_language(R"({"type": "object", "additionalProperties": false})");
  expect_language(empty, {"{}", "{ }"}, {R"({"a":1})"});
}

TEST(JsonSchema, AdditionalPropertiesSchemaExcludesDeclaredNames) {
  const auto lang = schema_language(R"({"type": "object", "properties": {"id": {"type": "integer"}},
      "required": ["id"], "additionalProperties": {"type": "string"}})");
  expect_language(lang, {R"({"id":1})", R"({"id":1,"x":"a"})", R"({"id":1,"i":"a","idx":"b","":"c"})"},
                  {R"({"id":1,"x":2})", R"({"id":1,"id":"a"})", R"({"x":"a"})", R"({"id":1,"x":"a",})"});
}

TEST(JsonSchema, AdditionalPropertiesAloneGivesAMap) {
  const auto lang = schema_language(R"({"type": "object", "additionalProperties": {"type": "integer"}})");
  // Extra keys are written without escapes (a subset): é appears raw.
  expect_language(lang, {"{}", R"({"a":1,"b":2})", "{\"\xc3\xa9\":3}"}, {R"({"a":"1"})", R"({"\u00e9":3})"});
}

TEST(JsonSchema, RequiredWithoutPropertiesAllowsAnyValue) {
  const auto lang = schema_language(R"({"type": "object", "required": ["k"]})");
  expect_language(lang, {R"({"k":1})", R"({"k":{"x":[null]}})"}, {"{}", R"({"j":1})"});
}

TEST(JsonSchema, ObjectWithoutPropertiesIsAnyObject) {
  const auto lang = schema_language(R"({"type": "object"})");
  expect_language(lang, {"{}", R"({"a":[1,{"b":null}],"c":"d"})", R"({"a":1,"a":2})"}, {"[]", "1", R"({"a"})"});
}

TEST(JsonSchema, TrueAndEmptySchemasAcceptAnyValue) {
  for (const char* s : {"true", "{}", R"({"description": "anything", "$comment": "c"})"}) {
    const auto lang = schema_language(s);
    expect_language(lang, {"null", "true", "-1.5e3", R"("x\n")", R"([1,{"a":[]}])", "{}"},
                    {"", "nul", "01", "[1,]", "'a'", "{\"a\":}"});
  }
}

TEST(JsonSchema, ArrayMinAndMaxItems) {
  const auto lang = schema_language(R"({"type": "array", "items": {"type": "boolean"}, "minItems": 2,
      "maxItems": 3})");
  expect_language(lang, {"[true,false]", "[true, true, false]"},
                  {"[]", "[true]", "[true,true,true,true]", "[true,1]", "[true,,false]"});
  const auto none = schema_language(R"({"type": "array", "maxItems": 0})");
  expect_language(none, {"[]", "[ ]"}, {"[1]"});
}

TEST(JsonSchema, PrefixItems) {
  const auto closed = schema_language(R"({"type": "array", "prefixItems": [{"type": "integer"},
      {"type": "string"}], "items": false})");
  expect_language(closed, {"[]", "[1]", R"([1,"a"])"}, {R"(["a"])", R"([1,"a",2])", R"([1,2])"});
  const auto open = schema_language(R"({"type": "array", "prefixItems": [{"type": "integer"}],
      "items": {"type": "null"}, "minItems": 2, "maxItems": 3})");
  expect_language(open, {"[1,null]", "[1,null,null]"}, {"[1]", "[null,null]", "[1,null,null,null]", "[1,2]"});
}

TEST(JsonSchema, TypeArrays) {
  const auto lang = schema_language(R"({"type": ["string", "null"], "maxLength": 2})");
  expect_language(lang, {"null", R"("")", R"("ab")"}, {R"("abc")", "1", "false"});
  const auto num = schema_language(R"({"type": ["integer", "number", "boolean"]})");
  expect_language(num, {"1", "1.5", "true"}, {"null", "\"1\""});
}

TEST(JsonSchema, AnyOf) {
  const auto lang = schema_language(R"({"anyOf": [{"type": "integer", "minimum": 10},
      {"type": "string", "maxLength": 1}, {"type": "integer", "maximum": -10}]})");
  expect_language(lang, {"10", "-10", R"("a")", "999"}, {"0", "9", "-9", R"("ab")"});
}

TEST(JsonSchema, AnyOfSiblingsApplyToEveryBranch) {
  const auto lang = schema_language(R"({"type": "object", "properties": {"a": {"type": "integer"},
      "b": {"type": "integer"}}, "additionalProperties": false,
      "anyOf": [{"required": ["a"]}, {"required": ["b"]}]})");
  expect_language(lang, {R"({"a":1})", R"({"b":1})", R"({"a":1,"b":2})"}, {"{}", R"({"c":1})"});
}

TEST(JsonSchema, OneOfWithDisjointBranches) {
  const auto types = schema_language(R"({"oneOf": [{"type": "string"}, {"type": "array", "maxItems": 1}]})");
  expect_language(types, {R"("x")", "[]", "[1]"}, {"[1,2]", "1"});
  const auto tagged = schema_language(R"({"oneOf": [
      {"type": "object", "properties": {"kind": {"const": "circle"}, "r": {"type": "number"}},
       "required": ["kind", "r"], "additionalProperties": false},
      {"type": "object", "properties": {"kind": {"enum": ["square", "rect"]}, "side": {"type": "number"}},
       "required": ["kind"], "additionalProperties": false}]})");
  expect_language(tagged, {R"({"kind":"circle","r":1})", R"({"kind":"square"})", R"({"kind":"rect","side":2})"},
                  {R"({"kind":"circle"})", R"({"kind":"square","r":1})", R"({"kind":"oval"})"});
}

TEST(JsonSchema, AllOfMergesParts) {
  const auto one = schema_language(R"({"allOf": [{"type": "object", "properties": {"a": {"type": "integer"}}}],
      "required": ["a"]})");
  expect_language(one, {R"({"a":1})"}, {"{}", R"({"a":"x"})"});
  const auto types = schema_language(R"({"allOf": [{"type": ["number", "string"]}, {"type": "integer"}],
      "minimum": 2})");
  expect_language(types, {"2", "30"}, {"1", "2.5", R"("a")"});
}

TEST(JsonSchema, RecursiveRefBuildsATree) {
  const auto lang = schema_language(R"({"$defs": {"node": {"type": "object", "properties": {
      "value": {"type": "integer"}, "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
      "required": ["value"], "additionalProperties": false}}, "$ref": "#/$defs/node"})");
  expect_language(lang,
                  {R"({"value":1})", R"({"value":1,"children":[]})",
                   R"({"value":1,"children":[{"value":2,"children":[{"value":3}]},{"value":4}]})"},
                  {R"({"children":[]})", R"({"value":1,"children":[{"children":[]}]})",
                   R"({"value":1,"children":[{"value":2,"children":[{"value":"3"}]}]})"});
}

TEST(JsonSchema, RefToRootDefinitionsAndEscapedPointers) {
  const auto root = schema_language(R"({"type": "object", "properties": {"next": {"$ref": "#"}},
      "additionalProperties": false})");
  expect_language(root, {"{}", R"({"next":{"next":{}}})"}, {R"({"next":1})"});
  const auto defs = schema_language(R"({"definitions": {"a/b": {"type": "integer"}, "c~d": {"type": "null"},
      "e f": {"type": "boolean"}}, "type": "array", "prefixItems": [{"$ref": "#/definitions/a~1b"},
      {"$ref": "#/definitions/c~0d"}, {"$ref": "#/definitions/e%20f"}], "items": false})");
  expect_language(defs, {"[1,null,true]", "[1]"}, {"[null]", "[1,1]"});
}

TEST(JsonSchema, RefWithSiblingKeywordsAppliesBoth) {
  const auto lang = schema_language(R"({"$defs": {"s": {"type": "string"}},
      "properties": {"x": {"$ref": "#/$defs/s", "maxLength": 2, "description": "d"}},
      "required": ["x"], "additionalProperties": false})");
  expect_language(lang, {R"({"x":"ab"})"}, {R"({"x":"abc"})", R"({"x":1})"});
}

TEST(JsonSchema, DeepNesting) {
  std::string schema = R"({"type": "integer", "minimum": 0, "maximum": 9})";
  std::string yes = "5", no = "10";
  for (int i = 0; i < 30; ++i) {
    schema = R"({"type": "object", "properties": {"k": )" + schema + R"(}, "required": ["k"]})";
    yes = R"({"k":)" + yes + "}";
    no = R"({"k":)" + no + "}";
  }
  const auto lang = schema_language(schema);
  expect_language(lang, {yes}, {no});
}

TEST(JsonSchema, RulesShareOneGrammarUnderTheirPrefixes) {
  const Deadline deadline(testing::kTestBudget);
  const std::string a = json_schema_rules(nlohmann::json::parse(R"({"type": "array", "items": {"type": "integer"}})"),
                                          "fn0-args", {}, deadline);
  const std::string b = json_schema_rules(nlohmann::json::parse(R"({"type": "array", "items": {"type": "string"}})"),
                                          "fn1-args", {}, deadline);
  const auto lang = testing::gbnf_language("root ::= fn0-args | fn1-args\n" + a + b);
  expect_language(lang, {"[1,2]", R"(["a"])"}, {R"([1,"a"])"});
}

TEST(JsonSchema, SortedJsonListsPropertiesAlphabetically) {
  const Deadline deadline(testing::kTestBudget);
  const auto lang = testing::gbnf_language(
      json_schema_to_gbnf(nlohmann::json::parse(R"({"properties": {"b": {"type": "null"}, "a": {"type": "null"}},
          "required": ["a", "b"]})"),
                          {}, deadline));
  expect_language(lang, {R"({"a":null,"b":null})"}, {R"({"b":null,"a":null})"});
}

TEST(JsonSchema, JsonObjectGrammar) {
  const auto lang = testing::gbnf_language(json_object_gbnf());
  expect_language(lang, {"{}", R"({"a":[1,2.5e-3,"x",true,null,{"b":{}}]})", "{ \"\\u00e9\" : \"\\n\" }"},
                  {"[]", "\"x\"", "1", "{\"a\":1,}", "{\"a\" 1}", "{\"a\":01}"});
}

}  // namespace
}  // namespace tokenmill::grammar
