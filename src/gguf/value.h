// A GGUF metadata value: one of the 13 GGUF value types, arrays nested to any
// depth. Values are small except token tables, which are arrays of strings.
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

namespace tokenmill::gguf {

enum class ValueType : uint32_t {
  UINT8 = 0,
  INT8 = 1,
  UINT16 = 2,
  INT16 = 3,
  UINT32 = 4,
  INT32 = 5,
  FLOAT32 = 6,
  BOOL = 7,
  STRING = 8,
  ARRAY = 9,
  UINT64 = 10,
  INT64 = 11,
  FLOAT64 = 12,
};

std::string_view value_type_name(ValueType type);

// Arrays of arrays are legal; deeper nesting than this is a malformed (or
// hostile) file: the reader refuses it, which bounds its recursion, and the
// writer refuses to write what the reader would refuse.
constexpr int kMaxArrayDepth = 16;

struct Value;

struct Array {
  ValueType element_type = ValueType::UINT8;
  std::vector<Value> items;
};

struct Value {
  ValueType type = ValueType::UINT8;
  // Integers of every width are held widened; type keeps the exact GGUF type
  // so that a writer reproduces the file. Booleans are held in `u`.
  std::variant<uint64_t, int64_t, double, std::string, Array> data;

  static Value u8(uint8_t v) { return {ValueType::UINT8, uint64_t{v}}; }
  static Value u32(uint32_t v) { return {ValueType::UINT32, uint64_t{v}}; }
  static Value u64(uint64_t v) { return {ValueType::UINT64, v}; }
  static Value i32(int32_t v) { return {ValueType::INT32, int64_t{v}}; }
  static Value i64(int64_t v) { return {ValueType::INT64, v}; }
  static Value f32(float v) { return {ValueType::FLOAT32, double{v}}; }
  static Value f64(double v) { return {ValueType::FLOAT64, v}; }
  static Value boolean(bool v) { return {ValueType::BOOL, uint64_t{v ? 1u : 0u}}; }
  static Value str(std::string v) { return {ValueType::STRING, std::move(v)}; }
  static Value array(ValueType element_type, std::vector<Value> items) {
    return {ValueType::ARRAY, Array{element_type, std::move(items)}};
  }

  bool is_integer() const;  // any signed or unsigned integer type (not bool)
  bool is_float() const { return type == ValueType::FLOAT32 || type == ValueType::FLOAT64; }
  bool is_string() const { return type == ValueType::STRING; }
  bool is_array() const { return type == ValueType::ARRAY; }
  bool is_bool() const { return type == ValueType::BOOL; }

  // Accessors assume the matching is_*() holds (checked: a mismatch is a bug).
  int64_t as_int() const;   // any integer type; uint64 above INT64_MAX aborts
  double as_float() const;  // float types, or any integer type
  bool as_bool() const;
  const std::string& as_string() const;
  const Array& as_array() const;

  // Short human-readable rendering (arrays are abbreviated), for inspect.
  std::string to_display_string(size_t max_items = 8) const;
};

}  // namespace tokenmill::gguf
