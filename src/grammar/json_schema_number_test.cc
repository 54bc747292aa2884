// Integer and number ranges: edges, exclusive bounds, and a sweep of random
// ranges against brute force (every integer in a window is accepted exactly
// when it lies in the range).
#include "grammar/json_schema_number.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <string>

#include "grammar/json_schema_test_util.h"

namespace tokenmill::grammar {
namespace {

using testing::expect_language;
using testing::schema_language;

TEST(JsonSchemaNumber, IntegerBoundsAreInclusive) {
  const auto lang = schema_language(R"({"type": "integer", "minimum": -37, "maximum": 1234})");
  expect_language(lang, {"-37", "-9", "0", "9", "10", "999", "1000", "1234"},
                  {"-38", "-100", "1235", "1300", "9999", "-0", "01", "1.0", "1e3", "+5", ""});
}

TEST(JsonSchemaNumber, ExclusiveAndFractionalIntegerBounds) {
  const auto lang = schema_language(R"({"type": "integer", "exclusiveMinimum": 5, "exclusiveMaximum": 100})");
  expect_language(lang, {"6", "99"}, {"5", "100", "4"});
  const auto frac = schema_language(R"({"type": "integer", "minimum": -2.5, "maximum": 7.9})");
  expect_language(frac, {"-2", "7"}, {"-3", "8"});
  const auto both = schema_language(R"({"type": "integer", "minimum": 3, "exclusiveMinimum": 3})");
  expect_language(both, {"4", "5000"}, {"3"});
}

TEST(JsonSchemaNumber, UnboundedIntegersStopAtSixteenDigits) {
  const auto lang = schema_language(R"({"type": "integer"})");
  expect_language(lang, {"0", "-1", "9999999999999999", "-9999999999999999"}, {"10000000000000000", "-0", "00"});
  const auto low = schema_language(R"({"type": "integer", "minimum": 100000000000000000})");
  expect_language(low, {"100000000000000000", "999999999999999999"}, {"99999999999999999"});
}

TEST(JsonSchemaNumber, IntegerRangesMatchBruteForce) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> bound(-1100, 1100);
  for (int round = 0; round < 40; ++round) {
    int lo = bound(rng), hi = bound(rng);
    if (lo > hi) std::swap(lo, hi);
    const auto lang = testing::gbnf_language("root ::= " + gbnf_integer_range(lo, hi) + "\n");
    for (int v = -1200; v <= 1200; ++v) {
      ASSERT_EQ(lang.accepts(std::to_string(v)), v >= lo && v <= hi) << v << " in [" << lo << ", " << hi << "]";
    }
  }
}

TEST(JsonSchemaNumber, DecimalRangesMatchBruteForce) {
  // Two fraction digits: every value on a 0.01 grid, written with one and
  // with two fraction digits, is accepted exactly when inside the range.
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> bound(-1100, 1100);
  for (int round = 0; round < 20; ++round) {
    int lo = bound(rng), hi = bound(rng);
    if (lo > hi) std::swap(lo, hi);
    const auto lang = testing::gbnf_language("root ::= " + gbnf_decimal_range(lo, hi, 2) + "\n");
    for (int v = -1200; v <= 1200; ++v) {
      char text[32];
      std::snprintf(text, sizeof text, "%s%d.%02d", v < 0 ? "-" : "", std::abs(v) / 100, std::abs(v) % 100);
      ASSERT_EQ(lang.accepts(text), v >= lo && v <= hi) << text << " in [" << lo << ", " << hi << "]";
      if (v % 10 == 0 && v % 100 != 0) {
        std::snprintf(text, sizeof text, "%s%d.%d", v < 0 ? "-" : "", std::abs(v) / 100, std::abs(v) % 100 / 10);
        ASSERT_EQ(lang.accepts(text), v >= lo && v <= hi) << text;
      }
      if (v % 100 == 0) {
        std::snprintf(text, sizeof text, "%s%d", v < 0 ? "-" : "", std::abs(v) / 100);
        ASSERT_EQ(lang.accepts(text), v >= lo && v <= hi) << text;
      }
    }
  }
}

TEST(JsonSchemaNumber, NumberBoundsWithFractions) {
  const auto lang = schema_language(R"({"type": "number", "minimum": -1.5, "maximum": 2.25})");
  expect_language(lang, {"-1.5", "-1.50", "-1.499999", "0", "0.5", "2", "2.25", "2.250000", "-1"},
                  {"-1.500001", "-1.6", "-2", "2.250001", "2.3", "3", "1e0", "-0", "-0.0", "01.5", "1."});
}

TEST(JsonSchemaNumber, ExclusiveNumberBounds) {
  const auto unit = schema_language(R"({"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1})");
  expect_language(unit, {"0.000001", "0.5", "0.999999"}, {"0", "0.0", "1", "1.0", "0.0000001", "-0.5"});
  // 0.30000000000000004 is the double nearest 0.1 + 0.2; 0.3 parses below it.
  const auto close = schema_language(R"({"type": "number", "exclusiveMinimum": 0.1,
      "maximum": 0.30000000000000004})");
  expect_language(close, {"0.100001", "0.3", "0.2"}, {"0.1", "0.100000", "0.300001"});
}

TEST(JsonSchemaNumber, OneSidedNumberBounds) {
  const auto lang = schema_language(R"({"type": "number", "minimum": 1000000.5})");
  expect_language(lang, {"1000000.5", "1000001", "999999999999.999999"},
                  {"1000000.499999", "1000000", "-1000001", "1e7"});
  const auto neg = schema_language(R"({"type": "number", "exclusiveMaximum": -3})");
  expect_language(neg, {"-3.000001", "-4", "-999999999999"}, {"-3", "-2.5", "0"});
}

TEST(JsonSchemaNumber, UnboundedNumbers) {
  const auto lang = schema_language(R"({"type": "number"})");
  expect_language(lang, {"0", "-0.5", "1e10", "1.5E-3", "12345678", "3.14"}, {"01", ".5", "1.", "1e", "--1", "+1"});
}

}  // namespace
}  // namespace tokenmill::grammar
