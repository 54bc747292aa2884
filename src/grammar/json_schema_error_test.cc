// What the converter refuses, and that each refusal names the keyword (or
// limit) and where it sits.
#include <gtest/gtest.h>

#include <string>

#include "grammar/json_schema.h"
#include "grammar/json_schema_test_util.h"

namespace tokenmill::grammar {
namespace {

using testing::contains;
using testing::schema_error;

TEST(JsonSchemaError, UnsupportedKeywordsAreNamedWithTheirPointer) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"type": "object", "patternProperties": {"^a": {}}})", "'patternProperties' at /"},
      {R"({"properties": {"a": {"not": {"type": "null"}}}})", "'not' at /properties/a"},
      {R"({"if": {}, "then": {}, "else": {}})", "'if' at /"},
      {R"({"type": "object", "dependentRequired": {"a": ["b"]}})", "'dependentRequired' at /"},
      {R"({"type": "array", "uniqueItems": true})", "'uniqueItems' at /"},
      {R"({"type": "integer", "multipleOf": 3})", "'multipleOf' at /"},
      {R"({"type": "array", "contains": {"type": "null"}})", "'contains' at /"},
      {R"({"type": "object", "minProperties": 1})", "'minProperties' at /"},
      {R"({"type": "object", "propertyNames": {"maxLength": 3}})", "'propertyNames' at /"},
      {R"({"type": "object", "unevaluatedProperties": false})", "'unevaluatedProperties' at /"},
      {R"({"type": "string", "format": "uri"})", "'format' at /: format 'uri'"},
      {R"({"$ref": "https://example.com/s.json"})", "'$ref' at /"},
      {R"({"$ref": "#anchor"})", "'$ref' at /"},
      {R"({"type": "object", "strict": true})", "'strict' at /"},
      {R"({"items": {"$anchor": "x"}})", "'$anchor' at /items"},
      {R"({"type": "array", "items": [{"type": "null"}]})", "'items' at /"},
      {R"({"$defs": {"a": {"nullable": true}}, "$ref": "#/$defs/a"})", "'nullable' at /$defs/a"},
      {R"({"properties": {"x": {"$id": "other"}}})", "'$id' at /properties/x"},
  };
  for (const auto& [schema, expected] : cases) {
    const std::string message = schema_error(schema);
    EXPECT_TRUE(contains(message, "unsupported JSON Schema keyword")) << schema;
    EXPECT_TRUE(contains(message, expected)) << schema;
  }
}

TEST(JsonSchemaError, InvalidSchemasSayWhatIsWrong) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"type": 5})", "'type' at / must be a string or an array of strings"},
      {R"({"type": "text"})", "unknown type 'text' at /type"},
      {R"({"type": "object", "required": "a"})", "'required' at / must be an array of strings"},
      {R"({"type": "object", "required": [1]})", "'required' at / must be an array of strings"},
      {R"({"type": "integer", "minimum": 5, "maximum": 4})", "minimum (5) is greater than maximum (4) at /"},
      {R"({"type": "number", "exclusiveMinimum": 2.5, "maximum": 1})",
       "exclusiveMinimum (2.5) is greater than maximum"},
      {R"({"type": "integer", "exclusiveMinimum": 3, "exclusiveMaximum": 4})", "no integer satisfies the bounds"},
      {R"({"type": "array", "minItems": 3, "maxItems": 2})", "minItems (3) is greater than maxItems (2) at /"},
      {R"({"type": "string", "minLength": 3, "maxLength": 2})", "minLength (3) is greater than maxLength (2)"},
      {R"({"type": "string", "maxLength": -1})", "'maxLength' at / must be a non-negative integer"},
      {R"({"type": "string", "minLength": 1.5})", "'minLength' at / must be a non-negative integer"},
      {R"({"$ref": "#/$defs/missing"})", "$ref '#/$defs/missing' at / points to nothing"},
      {R"({"$ref": 3})", "'$ref' at / must be a string"},
      {R"({"properties": {"a": 3}})", "the schema at /properties/a must be an object or a boolean"},
      {R"({"properties": {"a": false}, "required": ["a"]})", "the schema at /properties/a is false"},
      {"false", "the schema at / is false"},
      {R"({"enum": []})", "'enum' at / must be a non-empty array"},
      {R"({"type": "string", "enum": [1, 2]})", "no value of enum/const at / satisfies"},
      {R"({"type": "object", "required": ["x"], "additionalProperties": false})", "required property 'x' at /"},
      {R"({"type": "number", "exclusiveMinimum": true})", "'exclusiveMinimum' at / must be a number"},
      {R"({"allOf": [{"type": "string"}, {"type": "integer"}]})", "nothing in common"},
      {R"({"anyOf": []})", "'anyOf' at / must be a non-empty array"},
  };
  for (const auto& [schema, expected] : cases) EXPECT_TRUE(contains(schema_error(schema), expected)) << schema;
}

TEST(JsonSchemaError, OneOfNeedsProvablyDisjointBranches) {
  const char* overlapping[] = {
      R"({"oneOf": [{"type": "string"}, {"type": "string", "maxLength": 3}]})",
      R"({"oneOf": [{"type": "integer"}, {"type": "number"}]})",
      R"({"oneOf": [{"properties": {"a": {"const": 1}}}, {"type": "string"}]})",
      R"({"oneOf": [{"type": "object", "properties": {"k": {"const": "a"}}},
                    {"type": "object", "properties": {"k": {"const": "b"}}}]})",
      R"({"oneOf": [{"enum": [1, 2]}, {"enum": [2.0, 3]}]})",
  };
  for (const char* schema : overlapping) {
    EXPECT_TRUE(contains(schema_error(schema), "oneOf with overlapping branches is not supported; use anyOf"))
        << schema;
  }
  EXPECT_EQ(schema_error(R"({"oneOf": [{"enum": [1, 2]}, {"enum": ["1", 3]}]})"), "");
}

TEST(JsonSchemaError, CombinationsThatWouldNeedApproximation) {
  EXPECT_TRUE(contains(schema_error(R"({"allOf": [{"properties": {"a": {}}}, {"additionalProperties": false}]})"),
                       "'properties' and 'additionalProperties' come from different"));
  EXPECT_TRUE(contains(schema_error(R"({"allOf": [{"maxLength": 2}, {"maxLength": 3}]})"), "keyword 'maxLength'"));
  EXPECT_TRUE(contains(schema_error(R"({"type": "string", "pattern": "^a+$", "maxLength": 4})"),
                       "'pattern' together with minLength/maxLength"));
  EXPECT_TRUE(contains(schema_error(R"({"type": "string", "format": "email", "maxLength": 20})"),
                       "'format' 'email' together with minLength/maxLength"));
  EXPECT_TRUE(contains(schema_error(R"({"type": "string", "format": "date", "pattern": "^2"})"),
                       "'format' together with 'pattern'"));
  EXPECT_TRUE(contains(schema_error(R"({"enum": ["a"], "pattern": "a"})"), "'pattern' together with enum/const"));
  EXPECT_TRUE(contains(schema_error(R"({"type": "string", "pattern": "(a"})"), "'pattern' at /: regex: missing ')'"));
}

TEST(JsonSchemaError, LeftRecursiveReferences) {
  EXPECT_TRUE(contains(schema_error(R"({"anyOf": [{"$ref": "#"}, {"type": "null"}]})"), "left recursion"));
  EXPECT_TRUE(contains(schema_error(R"({"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"anyOf": [{"$ref": "#/$defs/a"}]}},
      "$ref": "#/$defs/a"})"),
                       "left recursion"));
}

TEST(JsonSchemaError, Limits) {
  GrammarLimits small;
  small.max_repetition = 50;
  EXPECT_TRUE(contains(schema_error(R"({"type": "string", "maxLength": 51})", small), "max_repetition (50)"));
  EXPECT_TRUE(contains(schema_error(R"({"type": "array", "minItems": 60})", small), "max_repetition (50)"));
  EXPECT_TRUE(contains(schema_error(R"({"type": "string", "pattern": "a{60}"})", small), "max_repetition (50)"));

  GrammarLimits shallow;
  shallow.max_schema_depth = 3;
  EXPECT_TRUE(contains(schema_error(R"({"properties": {"a": {"properties": {"b": {"properties": {"c": {"properties":
      {"d": {"type": "null"}}}}}}}}})",
                                    shallow),
                       "max_schema_depth (3)"));
  EXPECT_EQ(schema_error(R"({"properties": {"a": {"properties": {"b": {"type": "null"}}}}})", shallow), "");

  GrammarLimits tiny;
  tiny.max_gbnf_bytes = 2000;
  std::string big = R"({"enum": [)";
  for (int i = 0; i < 500; ++i) big += (i > 0 ? ",\"value" : "\"value") + std::to_string(i) + "\"";
  EXPECT_TRUE(contains(schema_error(big + "]}", tiny), "max_gbnf_bytes (2000"));
}

TEST(JsonSchemaError, DeadlineStopsConversion) {
  std::string big = R"({"enum": [)";
  for (int i = 0; i < 20000; ++i) big += (i > 0 ? ",\"value" : "\"value") + std::to_string(i) + "\"";
  const Deadline spent(std::chrono::milliseconds(0));
  try {
    json_schema_to_gbnf(nlohmann::json::parse(big + "]}"), {}, spent);
    FAIL() << "expected the deadline to stop the conversion";
  } catch (const Error& e) {
    EXPECT_TRUE(contains(std::string(e.what()), "grammar compilation took longer than 0 ms"));
  }
}

}  // namespace
}  // namespace tokenmill::grammar
