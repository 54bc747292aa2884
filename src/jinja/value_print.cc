// Python's str(), repr() and json.dumps() of template values: chat
// templates print lists and dicts, and tojson feeds tool schemas to the
// model, so the bytes must match what Python writes.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <stdexcept>

#include "jinja/render.h"
#include "jinja/value.h"

namespace tokenmill::jinja {
namespace {

thread_local size_t print_limit = SIZE_MAX;

void check_print_size(const std::string& out) {
  if (out.size() > print_limit) throw std::length_error("a printed value would exceed max_output_bytes");
}

// Python's repr of a str: single quotes unless the text has a single quote
// and no double quote.
void append_python_string(std::string& out, const std::string& s) {
  const bool dq = s.find('\'') != std::string::npos && s.find('"') == std::string::npos;
  const char quote = dq ? '"' : '\'';
  out += quote;
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '\\') {
      out += "\\\\";
    } else if (c == static_cast<unsigned char>(quote)) {
      out += '\\';
      out += ch;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += ch;
    }
  }
  out += quote;
}

void append_escaped_code_point(std::string& out, uint32_t cp) {
  char buf[16];
  if (cp >= 0x10000) {
    cp -= 0x10000;
    std::snprintf(buf, sizeof buf, "\\u%04x\\u%04x", 0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF));
  } else {
    std::snprintf(buf, sizeof buf, "\\u%04x", cp);
  }
  out += buf;
}

// Decodes the UTF-8 sequence at s[n] (a stray byte stands for itself); advances n.
uint32_t next_code_point(const std::string& s, size_t& n) {
  const auto c = static_cast<unsigned char>(s[n]);
  const size_t len = c >= 0xF0 ? 4 : (c >= 0xE0 ? 3 : (c >= 0xC0 ? 2 : 1));
  if (len == 1 || n + len > s.size()) {
    ++n;
    return c;
  }
  uint32_t cp = c & (0x7F >> len);
  for (size_t k = 1; k < len; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[n + k]) & 0x3F);
  n += len;
  return cp;
}

void append_json_char(std::string& out, char ch) {
  const auto c = static_cast<unsigned char>(ch);
  switch (c) {
    case '"': out += "\\\""; break;
    case '\\': out += "\\\\"; break;
    case '\n': out += "\\n"; break;
    case '\r': out += "\\r"; break;
    case '\t': out += "\\t"; break;
    case '\b': out += "\\b"; break;
    case '\f': out += "\\f"; break;
    default:
      if (c < 0x20) {
        append_escaped_code_point(out, c);
      } else {
        out += ch;
      }
  }
}

void append_json_string(std::string& out, const std::string& s, bool ensure_ascii) {
  out += '"';
  for (size_t n = 0; n < s.size();) {
    if (static_cast<unsigned char>(s[n]) < 0x80 || !ensure_ascii) {
      append_json_char(out, s[n++]);
    } else {
      append_escaped_code_point(out, next_code_point(s, n));
    }
  }
  out += '"';
}

void append_newline_indent(std::string& out, const JsonStyle& style, int level) {
  check_print_size(out);
  out += '\n';
  out.append(static_cast<size_t>(style.indent) * static_cast<size_t>(level), ' ');
}

std::string json_key(const Value& k) {
  switch (k.kind) {
    case Value::Kind::kString: return k.s;
    case Value::Kind::kInt: return std::to_string(k.i);
    case Value::Kind::kFloat: return format_python_float(k.f);
    case Value::Kind::kBool: return k.b ? "true" : "false";
    case Value::Kind::kNone: return "null";
    default:
      throw std::invalid_argument(std::string("keys must be str, int, float, bool or None, not ") + k.type_name());
  }
}

void append_json_dict(std::string& out, const Dict& d, const JsonStyle& style, int level) {
  if (d.entries.empty()) {
    out += "{}";
    return;
  }
  std::vector<std::pair<std::string, const Value*>> items;
  items.reserve(d.entries.size());
  for (const auto& [k, v] : d.entries) items.emplace_back(json_key(k), &v);
  if (style.sort_keys) {
    std::stable_sort(items.begin(), items.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  }
  out += '{';
  for (size_t n = 0; n < items.size(); ++n) {
    if (n > 0) out += style.item_separator;
    if (style.indent >= 0) append_newline_indent(out, style, level + 1);
    append_json_string(out, items[n].first, style.ensure_ascii);
    out += style.key_separator;
    append_json(out, *items[n].second, style, level + 1);
    check_print_size(out);
  }
  if (style.indent >= 0) append_newline_indent(out, style, level);
  out += '}';
}

}  // namespace

size_t current_print_limit() { return print_limit; }

bool container_bytes_exceed(size_t bytes, size_t max_output_bytes) {
  // A floor of 1 MiB keeps small lists usable under a tiny output limit.
  constexpr size_t kFloor = size_t{1} << 20;
  return bytes > kFloor && bytes / 4 > max_output_bytes;
}

void check_values_fit(size_t count) {
  if (container_bytes_exceed(count * sizeof(Value), print_limit))
    fail_limit("a list or dict would hold more than 4 x max_output_bytes");
}

PrintLimitScope::PrintLimitScope(size_t max_bytes) : saved_(print_limit) { print_limit = max_bytes; }
PrintLimitScope::~PrintLimitScope() { print_limit = saved_; }

std::string format_python_float(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  const size_t e = sci.find('e');
  const int exponent = std::stoi(sci.substr(e + 1));
  if (exponent < -4 || exponent >= 16) return sci;
  std::string digits;
  bool negative = false;
  for (size_t n = 0; n < e; ++n) {
    if (sci[n] == '-') negative = true;
    if (sci[n] >= '0' && sci[n] <= '9') digits += sci[n];
  }
  std::string out = negative ? "-" : "";
  if (exponent < 0) {
    out += "0.";
    out.append(static_cast<size_t>(-exponent - 1), '0');
    out += digits;
    return out;
  }
  const auto int_len = static_cast<size_t>(exponent) + 1;
  if (digits.size() <= int_len) {
    out += digits;
    out.append(int_len - digits.size(), '0');
    out += ".0";
  } else {
    out += digits.substr(0, int_len);
    out += '.';
    out += digits.substr(int_len);
  }
  return out;
}

void append_repr(std::string& out, const Value& v, int level) {
  if (level > kMaxPrintDepth) throw std::invalid_argument("a value nests too deeply (or contains itself) to print");
  if (v.is_list() && v.list->is_iterator) {
    out += "<generator object>";
    return;
  }
  switch (v.kind) {
    case Value::Kind::kString: append_python_string(out, v.s); return;
    case Value::Kind::kList: {
      const bool tuple = v.list->is_tuple;
      out += tuple ? '(' : '[';
      for (size_t n = 0; n < v.list->items.size(); ++n) {
        if (n > 0) out += ", ";
        append_repr(out, v.list->items[n], level + 1);
        check_print_size(out);
      }
      if (tuple && v.list->items.size() == 1) out += ',';
      out += tuple ? ')' : ']';
      return;
    }
    case Value::Kind::kDict: {
      if (v.dict->is_namespace) out += "<Namespace ";
      out += '{';
      bool first = true;
      for (const auto& [k, e] : v.dict->entries) {
        if (!first) out += ", ";
        first = false;
        append_repr(out, k, level + 1);
        out += ": ";
        append_repr(out, e, level + 1);
        check_print_size(out);
      }
      out += '}';
      if (v.dict->is_namespace) out += '>';
      return;
    }
    default: out += to_str(v);
  }
}

std::string to_repr(const Value& v) {
  std::string out;
  append_repr(out, v);
  return out;
}

std::string to_str(const Value& v) {
  switch (v.kind) {
    case Value::Kind::kUndefined: return "";
    case Value::Kind::kNone: return "None";
    case Value::Kind::kBool: return v.b ? "True" : "False";
    case Value::Kind::kInt: return std::to_string(v.i);
    case Value::Kind::kFloat: return format_python_float(v.f);
    case Value::Kind::kString: return v.s;
    case Value::Kind::kCallable: return "<function " + v.callable->name + ">";
    default: return to_repr(v);
  }
}

void append_json(std::string& out, const Value& v, const JsonStyle& style, int level) {
  if (level > kMaxPrintDepth) throw std::invalid_argument("a value nests too deeply to serialize");
  switch (v.kind) {
    case Value::Kind::kNone: out += "null"; return;
    case Value::Kind::kBool: out += v.b ? "true" : "false"; return;
    case Value::Kind::kInt: out += std::to_string(v.i); return;
    case Value::Kind::kFloat:
      if (std::isnan(v.f)) {
        out += "NaN";
      } else if (std::isinf(v.f)) {
        out += v.f > 0 ? "Infinity" : "-Infinity";
      } else {
        out += format_python_float(v.f);
      }
      return;
    case Value::Kind::kString: append_json_string(out, v.s, style.ensure_ascii); return;
    case Value::Kind::kList: {
      if (v.list->is_iterator) break;
      if (v.list->items.empty()) {
        out += "[]";
        return;
      }
      out += '[';
      for (size_t n = 0; n < v.list->items.size(); ++n) {
        if (n > 0) out += style.item_separator;
        if (style.indent >= 0) append_newline_indent(out, style, level + 1);
        append_json(out, v.list->items[n], style, level + 1);
        check_print_size(out);
      }
      if (style.indent >= 0) append_newline_indent(out, style, level);
      out += ']';
      return;
    }
    case Value::Kind::kDict:
      if (v.dict->is_namespace) break;
      append_json_dict(out, *v.dict, style, level);
      return;
    default: break;
  }
  throw std::invalid_argument(std::string("Object of type ") + v.type_name() + " is not JSON serializable");
}

}  // namespace tokenmill::jinja
