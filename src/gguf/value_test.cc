#include "gguf/value.h"

#include <gtest/gtest.h>

#include <limits>

namespace tokenmill::gguf {
namespace {

TEST(Value, AccessorsWidenIntegers) {
  EXPECT_EQ(Value::u8(200).as_int(), 200);
  EXPECT_EQ(Value::i32(-7).as_int(), -7);
  EXPECT_EQ(Value::u64(1ull << 40).as_int(), int64_t{1} << 40);
  EXPECT_DOUBLE_EQ(Value::i64(-3).as_float(), -3.0);
  EXPECT_DOUBLE_EQ(Value::u32(5).as_float(), 5.0);
  EXPECT_FLOAT_EQ(static_cast<float>(Value::f32(0.25f).as_float()), 0.25f);
  EXPECT_TRUE(Value::boolean(true).as_bool());
  EXPECT_FALSE(Value::boolean(false).as_bool());
  EXPECT_EQ(Value::str("abc").as_string(), "abc");
}

TEST(Value, TypePredicates) {
  EXPECT_TRUE(Value::u8(1).is_integer());
  EXPECT_FALSE(Value::boolean(true).is_integer());
  EXPECT_FALSE(Value::f32(1).is_integer());
  EXPECT_TRUE(Value::f64(1).is_float());
  EXPECT_TRUE(Value::array(ValueType::INT32, {}).is_array());
  EXPECT_TRUE(Value::str("").is_string());
}

TEST(Value, DeathOnMismatchedAccess) {
  EXPECT_DEATH(Value::str("x").as_int(), "CHECK failed");
  EXPECT_DEATH(Value::u64(std::numeric_limits<uint64_t>::max()).as_int(), "CHECK failed");
}

TEST(Value, DisplayScalars) {
  EXPECT_EQ(Value::u8(7).to_display_string(), "7");
  EXPECT_EQ(Value::i64(-42).to_display_string(), "-42");
  EXPECT_EQ(Value::u64(18446744073709551615ull).to_display_string(), "18446744073709551615");
  EXPECT_EQ(Value::boolean(true).to_display_string(), "true");
  // float32 prints at float precision, not as the widened double.
  EXPECT_EQ(Value::f32(1e-6f).to_display_string(), "1e-06");
  EXPECT_EQ(Value::f32(10000.0f).to_display_string(), "10000");
  EXPECT_EQ(Value::f64(0.1).to_display_string(), "0.1");
}

TEST(Value, DisplayStringsAreEscapedAndCut) {
  EXPECT_EQ(Value::str("a\"b\\c\n\t\x01").to_display_string(), "\"a\\\"b\\\\c\\n\\t\\x01\"");
  std::string long_text(300, 'x');
  std::string shown = Value::str(long_text).to_display_string();
  EXPECT_EQ(shown, "\"" + std::string(120, 'x') + "\"... (300 bytes)");
}

TEST(Value, DisplayArraysAbbreviated) {
  std::vector<Value> items;
  for (int i = 0; i < 10; ++i) items.push_back(Value::i32(i));
  Value a = Value::array(ValueType::INT32, items);
  EXPECT_EQ(a.to_display_string(3), "[0, 1, 2, ... 7 more]");
  EXPECT_EQ(a.to_display_string(10), "[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]");
  EXPECT_EQ(a.to_display_string(0), "[... 10 more]");
  EXPECT_EQ(Value::array(ValueType::STRING, {}).to_display_string(), "[]");
  Value nested = Value::array(ValueType::ARRAY,
                              {Value::array(ValueType::STRING, {Value::str("a")}), Value::array(ValueType::UINT8, {})});
  EXPECT_EQ(nested.to_display_string(), "[[\"a\"], []]");
}

TEST(Value, TypeNames) {
  EXPECT_EQ(value_type_name(ValueType::UINT8), "uint8");
  EXPECT_EQ(value_type_name(ValueType::FLOAT64), "float64");
  EXPECT_EQ(value_type_name(ValueType::STRING), "string");
  EXPECT_EQ(value_type_name(ValueType::ARRAY), "array");
}

}  // namespace
}  // namespace tokenmill::gguf
