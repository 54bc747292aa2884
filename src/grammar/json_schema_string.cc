// Strings (length, pattern, format), enum/const, and the shared rules for
// any JSON value.
#include <algorithm>
#include <cmath>
#include <optional>

#include "grammar/json_schema_converter.h"
#include "grammar/regex.h"
#include "grammar/regex_charset.h"
#include "grammar/regex_parser.h"
#include "util/error.h"

namespace tokenmill::grammar {
namespace {

// One JSON string character: unescaped, or an escape that decodes to one
// code point. \u escapes of surrogates are left out: a pair decodes to one
// character, which would make minLength/maxLength count wrong.
constexpr const char* kCharRule =
    R"([^"\\\x00-\x1f] | "\\" (["\\/bfnrt] | "u" ([0-9a-cA-CefEF] [0-9a-fA-F]{3} | [dD] [0-7] [0-9a-fA-F]{2})))";

// Python's date.fromisoformat rejects day 29 of February in common years;
// February stops at 28 so that no year needs checking.
constexpr const char* kDateRule =
    R"(([1-9] [0-9]{3} | "0" ([1-9] [0-9]{2} | "0" ([1-9] [0-9] | "0" [1-9]))) "-" )"
    R"(("0" ("2-" ("0" [1-9] | "1" [0-9] | "2" [0-8]) | [13578] "-" ("0" [1-9] | [12] [0-9] | "3" [01]) | )"
    R"([469] "-" ("0" [1-9] | [12] [0-9] | "30")) | "1" ([02] "-" ("0" [1-9] | [12] [0-9] | "3" [01]) | )"
    R"("1-" ("0" [1-9] | [12] [0-9] | "30"))))";

// RFC 3339 full-time (what Python's jsonschema checks through
// rfc3339-validator): the offset is required, no leap second.
constexpr const char* kTimeRule = R"(([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9] ":" [0-5] [0-9] ("." [0-9]{1,6})? )"
                                  R"(("Z" | [+-] ([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9]))";

constexpr const char* kUuidRule =
    R"([0-9a-fA-F]{8} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{12})";

// Python's jsonschema only asks for an "@"; this is a plain, short address
// (at most 124 characters) so that a sampled model cannot ramble in it.
constexpr const char* kEmailRule = R"([A-Za-z0-9._%+-]{1,40} "@" [A-Za-z0-9-]{1,20} ("." [A-Za-z0-9-]{1,20}){1,3})";

// No leading zeros (Python's ipaddress refuses them); every prefix has one reading.
constexpr const char* kIpv4Octet =
    R"(("0" | "1" ([0-9] [0-9]?)? | "2" ([0-4] [0-9]? | "5" [0-5]? | [6-9])? | [3-9] [0-9]?))";

struct Format {
  const char* name;
  int64_t min_len;
  int64_t max_len;
};

constexpr Format kFormats[] = {
    {"date", 10, 10}, {"time", 9, 21}, {"date-time", 20, 32}, {"uuid", 36, 36}, {"email", 5, 124}, {"ipv4", 7, 15},
};

std::string string_literal_of(const std::string& inner) {
  return "\"\\\"\" " + (inner.empty() ? "" : inner + " ") + "\"\\\"\"";
}

// -1, 0, 1, or nullopt when doubles cannot decide exactly (an integer
// beyond 2^53 against a fraction); callers treat nullopt as "fails".
std::optional<int> compare_numbers(const Json& a, const Json& b) {
  if ((a.is_number_integer() || a.is_number_unsigned()) && (b.is_number_integer() || b.is_number_unsigned())) {
    auto wide = [](const Json& v) {
      return v.is_number_unsigned() ? static_cast<__int128>(v.get<uint64_t>())
                                    : static_cast<__int128>(v.get<int64_t>());
    };
    const __int128 x = wide(a), y = wide(b);
    return x < y ? -1 : (x > y ? 1 : 0);
  }
  constexpr double kExact = 9007199254740992.0;  // 2^53
  const double x = a.get<double>(), y = b.get<double>();
  if ((!a.is_number_float() && std::fabs(x) > kExact) || (!b.is_number_float() && std::fabs(y) > kExact)) {
    return std::nullopt;
  }
  return x < y ? -1 : (x > y ? 1 : 0);
}

bool type_matches(const Json& v, const std::string& type) {
  if (type == "null") return v.is_null();
  if (type == "boolean") return v.is_boolean();
  if (type == "object") return v.is_object();
  if (type == "array") return v.is_array();
  if (type == "string") return v.is_string();
  if (type == "number") return v.is_number();
  if (type == "integer") {
    return v.is_number_integer() || v.is_number_unsigned() ||
           (v.is_number_float() && std::isfinite(v.get<double>()) && v.get<double>() == std::floor(v.get<double>()));
  }
  return false;
}

std::string dump_value(const Json& v, const std::string& ptr) {
  try {
    return v.dump();
  } catch (const nlohmann::json::exception&) {
    fail("a value at {} is not valid UTF-8", where(ptr));
  }
}

}  // namespace

std::string SchemaConverter::primitive(const std::string& what) {
  if (auto it = primitives_.find(what); it != primitives_.end()) return it->second;
  const std::string name = sink_.fresh_name(what);
  primitives_[what] = name;  // before the body: value, object and array refer to each other
  std::string body;
  if (what == "ws") {
    body = R"([ \t\n]{0,4})";
  } else if (what == "char") {
    body = kCharRule;
  } else if (what == "string") {
    body = string_literal_of(primitive("char") + "*");
  } else if (what == "number") {
    body = R"("-"? ("0" | [1-9] [0-9]{0,15}) ("." [0-9]{1,16})? ([eE] [-+]? [0-9]{1,2})?)";
  } else if (what == "value") {
    body = primitive("object") + " | " + primitive("array") + " | " + primitive("string") + " | " +
           primitive("number") + R"( | "true" | "false" | "null")";
  } else if (what == "object") {
    const std::string ws = primitive("ws"),
                      member = primitive("string") + " " + ws + " \":\" " + ws + " " + primitive("value") + " " + ws;
    body = "\"{\" " + ws + " (" + member + " (\",\" " + ws + " " + member + ")*)? \"}\"";
  } else if (what == "array") {
    const std::string ws = primitive("ws"), elem = primitive("value") + " " + ws;
    body = "\"[\" " + ws + " (" + elem + " (\",\" " + ws + " " + elem + ")*)? \"]\"";
  } else if (what == "date") {
    body = kDateRule;
  } else if (what == "time") {
    body = kTimeRule;
  } else if (what == "date-time") {
    body = primitive("date") + " \"T\" " + primitive("time");
  } else if (what == "uuid") {
    body = kUuidRule;
  } else if (what == "email") {
    body = kEmailRule;
  } else if (what == "ipv4") {
    body = std::string(kIpv4Octet) + " \".\" " + kIpv4Octet + " \".\" " + kIpv4Octet + " \".\" " + kIpv4Octet;
  }
  sink_.define(name, std::move(body));
  return name;
}

std::string SchemaConverter::gen_string(const Json& schema, const std::string& ptr) {
  const int64_t min = std::max<int64_t>(0, count_keyword(schema, "minLength", ptr));
  const int64_t max = count_keyword(schema, "maxLength", ptr);
  if (max >= 0 && min > max) fail("minLength ({}) is greater than maxLength ({}) at {}", min, max, where(ptr));
  auto format = schema.find("format");
  auto pattern = schema.find("pattern");
  if (format != schema.end() && !format->is_string()) fail("'format' at {} must be a string", where(ptr));
  if (pattern != schema.end() && !pattern->is_string()) fail("'pattern' at {} must be a string", where(ptr));
  if (format != schema.end() && pattern != schema.end()) {
    fail("'format' together with 'pattern' at {} is not supported", where(ptr));
  }
  if (format != schema.end()) return string_literal_of(gen_format(format->get<std::string>(), ptr, min, max));
  if (pattern == schema.end()) {
    if (min == 0 && max < 0) return primitive("string");
    std::string& rule = string_rules_[{min, max}];
    if (rule.empty()) {
      rule = sink_.add("string-" + std::to_string(min) + "-" + (max < 0 ? "more" : std::to_string(max)),
                       string_literal_of(repeat_text(primitive("char"), min, max)));
    }
    return rule;
  }

  const auto text = pattern->get<std::string>();
  const RegexOptions options{.json_string = true, .search = true};
  RegexLengthRange lengths;
  std::string rule;
  try {
    lengths = regex_length_range(text, limits_, deadline_, options);
    rule = add_regex_rule(text, sink_, "pattern", limits_, deadline_, options);
  } catch (const Error& e) {
    fail("'pattern' at {}: {}", where(ptr), e.what());
  }
  if (lengths.min < min || (max >= 0 && (lengths.max < 0 || lengths.max > max))) {
    fail(
        "'pattern' together with minLength/maxLength at {} is supported only when every match of the pattern "
        "satisfies them (anchor it with ^...$ and bound its repetitions)",
        where(ptr));
  }
  return string_literal_of(rule);
}

std::string SchemaConverter::gen_format(const std::string& format, const std::string& ptr, int64_t min_len,
                                        int64_t max_len) {
  const Format* f =
      std::find_if(std::begin(kFormats), std::end(kFormats), [&](const Format& x) { return x.name == format; });
  if (f == std::end(kFormats)) {
    fail(
        "unsupported JSON Schema keyword 'format' at {}: format '{}' (supported: date, time, date-time, uuid, "
        "email, ipv4)",
        where(ptr), format);
  }
  if (f->min_len < min_len || (max_len >= 0 && f->max_len > max_len)) {
    fail(
        "'format' '{}' together with minLength/maxLength at {} is supported only when every such string ({} to {} "
        "characters) satisfies them",
        format, where(ptr), f->min_len, f->max_len);
  }
  return primitive(format);
}

std::string SchemaConverter::gen_literals(const Json& schema, const std::string& ptr, std::string_view hint) {
  static constexpr std::string_view kFilters[] = {
      "type", "enum", "const", "minLength", "maxLength", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"};
  for (const auto& [key, unused] : schema.items()) {
    if (is_annotation(key) || is_container(key)) continue;
    if (std::find(std::begin(kFilters), std::end(kFilters), key) == std::end(kFilters)) {
      fail("'{}' together with enum/const at {} is not supported", key, where(ptr));
    }
  }
  std::vector<Json> values;
  if (auto e = schema.find("enum"); e != schema.end()) {
    if (!e->is_array() || e->empty()) fail("'enum' at {} must be a non-empty array", where(ptr));
    values.assign(e->begin(), e->end());
  }
  if (auto c = schema.find("const"); c != schema.end()) {
    if (schema.contains("enum")) {
      std::erase_if(values, [&](const Json& v) { return !json_equal(v, *c); });
    } else {
      values.push_back(*c);
    }
  }
  const std::vector<std::string> types = types_of_keywords(schema, ptr);
  const int64_t min_len = count_keyword(schema, "minLength", ptr), max_len = count_keyword(schema, "maxLength", ptr);
  std::vector<std::pair<const char*, int>> bounds;  // keyword, the comparison results it allows
  for (const char* key : {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}) {
    if (!schema.contains(key)) continue;
    if (!schema[key].is_number()) fail("'{}' at {} must be a number", key, where(ptr));
    bounds.push_back({key, 0});
  }
  auto passes = [&](const Json& v) {
    if (schema.contains("type") &&
        std::none_of(types.begin(), types.end(), [&](const std::string& t) { return type_matches(v, t); })) {
      return false;
    }
    if (v.is_string()) {
      const auto len = static_cast<int64_t>(decode_utf8(v.get<std::string>(), "enum value").size());
      if (len < min_len || (max_len >= 0 && len > max_len)) return false;
    }
    if (!v.is_number()) return true;
    for (const auto& [key, unused] : bounds) {
      const std::optional<int> c = compare_numbers(v, schema[key]);
      const std::string_view k = key;
      if (!c || (k == "minimum" && *c < 0) || (k == "maximum" && *c > 0) || (k == "exclusiveMinimum" && *c <= 0) ||
          (k == "exclusiveMaximum" && *c >= 0)) {
        return false;
      }
    }
    return true;
  };
  LiteralTrie trie;
  for (const Json& v : values) {
    if (passes(v)) trie.insert(decode_utf8(dump_value(v, ptr), "enum value"));
  }
  if (trie.empty()) fail("no value of enum/const at {} satisfies the schema's other keywords", where(ptr));
  return trie.emit(sink_, hint.empty() ? "enum" : std::string(hint), deadline_);
}

}  // namespace tokenmill::grammar
