#include "gguf/value.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <limits>

#include "util/check.h"

namespace tokenmill::gguf {
namespace {

constexpr size_t kMaxDisplayStringBytes = 120;

bool is_unsigned(ValueType t) {
  return t == ValueType::UINT8 || t == ValueType::UINT16 || t == ValueType::UINT32 || t == ValueType::UINT64;
}

// Quotes a string with C-style escapes so that control characters and
// newlines (chat templates) stay on one line; long strings are cut.
std::string quote(const std::string& s) {
  std::string out = "\"";
  size_t shown = std::min(s.size(), kMaxDisplayStringBytes);
  for (size_t i = 0; i < shown; ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    switch (c) {
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      default:
        if (c < 0x20 || c == 0x7f) {
          out += fmt::format("\\x{:02x}", c);
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
  if (shown < s.size()) out += fmt::format("... ({} bytes)", s.size());
  return out;
}

}  // namespace

std::string_view value_type_name(ValueType type) {
  switch (type) {
    case ValueType::UINT8: return "uint8";
    case ValueType::INT8: return "int8";
    case ValueType::UINT16: return "uint16";
    case ValueType::INT16: return "int16";
    case ValueType::UINT32: return "uint32";
    case ValueType::INT32: return "int32";
    case ValueType::FLOAT32: return "float32";
    case ValueType::BOOL: return "bool";
    case ValueType::STRING: return "string";
    case ValueType::ARRAY: return "array";
    case ValueType::UINT64: return "uint64";
    case ValueType::INT64: return "int64";
    case ValueType::FLOAT64: return "float64";
  }
  return "unknown";
}

bool Value::is_integer() const {
  switch (type) {
    case ValueType::UINT8:
    case ValueType::INT8:
    case ValueType::UINT16:
    case ValueType::INT16:
    case ValueType::UINT32:
    case ValueType::INT32:
    case ValueType::UINT64:
    case ValueType::INT64: return true;
    default: return false;
  }
}

int64_t Value::as_int() const {
  TM_CHECK(is_integer());
  if (is_unsigned(type)) {
    uint64_t v = std::get<uint64_t>(data);
    TM_CHECK_MSG(v <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()), "uint64 value does not fit int64");
    return static_cast<int64_t>(v);
  }
  return std::get<int64_t>(data);
}

double Value::as_float() const {
  if (is_float()) return std::get<double>(data);
  TM_CHECK(is_integer());
  if (is_unsigned(type)) return static_cast<double>(std::get<uint64_t>(data));
  return static_cast<double>(std::get<int64_t>(data));
}

bool Value::as_bool() const {
  TM_CHECK(is_bool());
  return std::get<uint64_t>(data) != 0;
}

const std::string& Value::as_string() const {
  TM_CHECK(is_string());
  return std::get<std::string>(data);
}

const Array& Value::as_array() const {
  TM_CHECK(is_array());
  return std::get<Array>(data);
}

std::string Value::to_display_string(size_t max_items) const {
  switch (type) {
    case ValueType::BOOL: return as_bool() ? "true" : "false";
    case ValueType::STRING: return quote(as_string());
    // A float32 is printed at float precision: 1e-06, not 9.99999997e-07.
    case ValueType::FLOAT32: return fmt::format("{}", static_cast<float>(std::get<double>(data)));
    case ValueType::FLOAT64: return fmt::format("{}", std::get<double>(data));
    case ValueType::ARRAY: {
      const Array& a = as_array();
      std::string out = "[";
      size_t shown = std::min(a.items.size(), max_items);
      for (size_t i = 0; i < shown; ++i) {
        if (i > 0) out += ", ";
        out += a.items[i].to_display_string(max_items);
      }
      if (shown < a.items.size()) {
        out += fmt::format("{}... {} more", shown > 0 ? ", " : "", a.items.size() - shown);
      }
      return out + "]";
    }
    default:
      if (is_unsigned(type)) return fmt::format("{}", std::get<uint64_t>(data));
      return fmt::format("{}", std::get<int64_t>(data));
  }
}

}  // namespace tokenmill::gguf
