#include "grammar/json_schema.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <chrono>
#include <cmath>

#include "grammar/json_schema_converter.h"
#include "util/error.h"

namespace tokenmill::grammar {
namespace {

// Keywords that never change which values are valid.
constexpr std::array<std::string_view, 10> kAnnotations = {
    "title", "description", "examples", "default", "$schema", "$id", "$comment", "deprecated", "readOnly", "writeOnly"};

// Validation keywords the converter implements, with the instance type
// each one constrains ("" for keywords that apply to every type).
constexpr std::array<std::pair<std::string_view, std::string_view>, 23> kKeywords = {{
    {"type", ""},
    {"enum", ""},
    {"const", ""},
    {"anyOf", ""},
    {"oneOf", ""},
    {"allOf", ""},
    {"$ref", ""},
    {"properties", "object"},
    {"required", "object"},
    {"additionalProperties", "object"},
    {"items", "array"},
    {"prefixItems", "array"},
    {"minItems", "array"},
    {"maxItems", "array"},
    {"uniqueItems", "array"},
    {"minLength", "string"},
    {"maxLength", "string"},
    {"pattern", "string"},
    {"format", "string"},
    {"minimum", "number"},
    {"maximum", "number"},
    {"exclusiveMinimum", "number"},
    {"exclusiveMaximum", "number"},
}};

const std::string_view* keyword_type(std::string_view key) {
  for (const auto& [k, t] : kKeywords) {
    if (k == key) return &t;
  }
  return nullptr;
}

constexpr std::array<std::string_view, 7> kTypeNames = {"null",   "boolean", "object", "array",
                                                        "number", "integer", "string"};

std::string percent_decode(std::string_view s, const std::string& ref, const std::string& ptr) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out += s[i];
      continue;
    }
    if (i + 2 >= s.size() || !std::isxdigit(static_cast<unsigned char>(s[i + 1])) ||
        !std::isxdigit(static_cast<unsigned char>(s[i + 2]))) {
      fail("$ref '{}' at {} has a bad percent escape", ref, where(ptr));
    }
    out += static_cast<char>(std::stoi(std::string(s.substr(i + 1, 2)), nullptr, 16));
    i += 2;
  }
  return out;
}

}  // namespace

std::string child_pointer(const std::string& ptr, std::string_view key) {
  std::string out = ptr + "/";
  for (char c : key) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out += c;
    }
  }
  return out;
}

std::string child_pointer(const std::string& ptr, size_t index) { return ptr + "/" + std::to_string(index); }

std::string where(const std::string& ptr) { return ptr.empty() ? "/" : ptr; }

bool is_annotation(std::string_view key) {
  return std::find(kAnnotations.begin(), kAnnotations.end(), key) != kAnnotations.end();
}

bool is_container(std::string_view key) { return key == "$defs" || key == "definitions"; }

bool json_equal(const Json& a, const Json& b) { return nlohmann::json(a) == nlohmann::json(b); }

SchemaConverter::SchemaConverter(const Json& root, std::string root_name, const GrammarLimits& limits,
                                 const Deadline& deadline)
    : root_(root), limits_(limits), deadline_(deadline), sink_(std::move(root_name), limits) {}

std::string SchemaConverter::convert() {
  ref_rules_[""] = sink_.prefix();
  rule_ptrs_[sink_.prefix()] = "";
  current_rule_ = sink_.prefix();
  at_start_ = true;
  std::string body = visit(root_, "", 0, "");
  sink_.define(sink_.prefix(), std::move(body));
  check_left_recursion();
  return sink_.text();
}

std::string SchemaConverter::any_object_rules() {
  sink_.define(sink_.prefix(), primitive("object"));
  return sink_.text();
}

void SchemaConverter::check_keywords(const Json& schema, const std::string& ptr) const {
  for (const auto& [key, value] : schema.items()) {
    if (key == "$id" && !ptr.empty()) {
      fail("unsupported JSON Schema keyword '$id' at {} (an $id below the root changes how $ref resolves)", where(ptr));
    }
    if (is_annotation(key)) continue;
    if (is_container(key)) {
      if (!value.is_object()) fail("'{}' at {} must be an object of schemas", key, where(ptr));
      continue;
    }
    if (keyword_type(key) == nullptr) fail("unsupported JSON Schema keyword '{}' at {}", key, where(ptr));
    if (key == "uniqueItems" && !(value.is_boolean() && !value.get<bool>())) {
      fail("unsupported JSON Schema keyword 'uniqueItems' at {} (only false is supported)", where(ptr));
    }
  }
}

std::string SchemaConverter::visit(const Json& schema, const std::string& ptr, int depth, std::string_view hint) {
  deadline_.check("JSON Schema");
  if (depth > limits_.max_schema_depth) {
    fail("JSON Schema nesting at {} exceeds max_schema_depth ({})", where(ptr), limits_.max_schema_depth);
  }
  if (schema.is_boolean()) {
    if (schema.get<bool>()) return primitive("value");
    fail("the schema at {} is false: no value is valid there", where(ptr));
  }
  if (!schema.is_object())
    fail("the schema at {} must be an object or a boolean, not {}", where(ptr), schema.type_name());
  check_keywords(schema, ptr);
  if (schema.contains("$ref")) return gen_ref_with_siblings(schema, ptr, depth, hint);
  if (schema.contains("allOf")) return gen_all_of(schema, ptr, depth, hint);
  if (schema.contains("anyOf") || schema.contains("oneOf")) return gen_any_of(schema, ptr, depth, hint);
  if (schema.contains("enum") || schema.contains("const")) return gen_literals(schema, ptr, hint);
  const std::vector<std::string> types = types_of_keywords(schema, ptr);
  if (types.empty()) return primitive("value");
  if (types.size() == 1) return gen_typed(schema, types[0], ptr, depth, hint);
  std::string out = "(";
  for (size_t i = 0; i < types.size(); ++i) {
    out += (i > 0 ? " | " : "") + gen_typed(schema, types[i], ptr, depth, hint);
  }
  return out + ")";
}

// The types a schema's values may take as the converter generates them:
// `type` when given, else the types its keywords constrain (a subset of
// what the schema allows, since without `type` every other type is valid
// too). Empty: any value.
std::vector<std::string> SchemaConverter::types_of_keywords(const Json& schema, const std::string& ptr) const {
  std::vector<std::string> types;
  if (auto it = schema.find("type"); it != schema.end()) {
    const Json& t = *it;
    if (!t.is_string() && !t.is_array()) fail("'type' at {} must be a string or an array of strings", where(ptr));
    const Json list = t.is_string() ? Json::array({t}) : t;
    for (const Json& name : list) {
      if (!name.is_string()) fail("'type' at {} must be a string or an array of strings", where(ptr));
      const auto s = name.get<std::string>();
      if (std::find(kTypeNames.begin(), kTypeNames.end(), s) == kTypeNames.end()) {
        fail("unknown type '{}' at {}", s, where(child_pointer(ptr, "type")));
      }
      if (std::find(types.begin(), types.end(), s) == types.end()) types.push_back(s);
    }
    if (types.empty()) fail("'type' at {} is an empty array: no value is valid", where(ptr));
    // Every integer is a number; generating both would be ambiguous.
    if (std::find(types.begin(), types.end(), "number") != types.end()) {
      types.erase(std::remove(types.begin(), types.end(), "integer"), types.end());
    }
    return types;
  }
  for (const auto& [key, value] : schema.items()) {
    const std::string_view* t = keyword_type(key);
    if (t == nullptr || t->empty() || (key == "uniqueItems")) continue;
    if (std::find(types.begin(), types.end(), *t) == types.end()) types.emplace_back(*t);
  }
  return types;
}

std::string SchemaConverter::gen_typed(const Json& schema, const std::string& type, const std::string& ptr, int depth,
                                       std::string_view hint) {
  if (type == "null") return "\"null\"";
  if (type == "boolean") return "(\"true\" | \"false\")";
  if (type == "object") return gen_object(schema, ptr, depth, hint);
  if (type == "array") return gen_array(schema, ptr, depth, hint);
  if (type == "string") return gen_string(schema, ptr);
  if (type == "integer") return gen_integer(schema, ptr);
  return gen_number(schema, ptr);
}

std::string SchemaConverter::ref_pointer(const Json& ref, const std::string& ptr) const {
  if (!ref.is_string()) fail("'$ref' at {} must be a string", where(ptr));
  const auto text = ref.get<std::string>();
  if (text.empty() || text[0] != '#' || (text.size() > 1 && text[1] != '/')) {
    fail(
        "unsupported JSON Schema keyword '$ref' at {}: '{}' is not a local reference (#, #/$defs/NAME, "
        "#/definitions/NAME or another #/ pointer)",
        where(ptr), text);
  }
  return percent_decode(std::string_view(text).substr(1), text, ptr);
}

const Json& SchemaConverter::resolve(const std::string& target_ptr, const std::string& ref,
                                     const std::string& ptr) const {
  try {
    return root_.at(Json::json_pointer(target_ptr));
  } catch (const nlohmann::json::exception&) {
    fail("$ref '{}' at {} points to nothing in this schema", ref, where(ptr));
  }
}

std::string SchemaConverter::ref_rule(const Json& ref, const std::string& ptr, int depth) {
  const std::string target_ptr = ref_pointer(ref, ptr);
  std::string name;
  if (auto it = ref_rules_.find(target_ptr); it != ref_rules_.end()) {
    name = it->second;
  } else {
    const Json& target = resolve(target_ptr, ref.get<std::string>(), ptr);
    const size_t slash = target_ptr.rfind('/');
    name = sink_.fresh_name(slash == std::string::npos ? "ref" : target_ptr.substr(slash + 1));
    ref_rules_[target_ptr] = name;
    rule_ptrs_[name] = target_ptr;
    if (at_start_) left_edges_[current_rule_].insert(name);
    const std::string saved_rule = current_rule_;
    const bool saved_start = at_start_;
    current_rule_ = name;
    at_start_ = true;
    std::string body = visit(target, target_ptr, depth + 1, name.substr(sink_.prefix().size() + 1));
    current_rule_ = saved_rule;
    at_start_ = saved_start;
    sink_.define(name, std::move(body));
    return name;
  }
  if (at_start_) left_edges_[current_rule_].insert(name);
  return name;
}

void SchemaConverter::check_left_recursion() const {
  // Depth-first search for a cycle; 1 = on the current path, 2 = done.
  std::map<std::string, int> state;
  std::vector<std::pair<std::string, std::set<std::string>::const_iterator>> stack;
  for (const auto& [start, unused] : left_edges_) {
    if (state[start] != 0) continue;
    state[start] = 1;
    stack.push_back({start, left_edges_.at(start).begin()});
    while (!stack.empty()) {
      auto& [rule, it] = stack.back();
      auto edges = left_edges_.find(rule);
      if (edges == left_edges_.end() || it == edges->second.end()) {
        state[rule] = 2;
        stack.pop_back();
        continue;
      }
      const std::string next = *it++;
      if (state[next] == 1) {
        fail("the schema at {} refers to itself through $ref before any character is read (left recursion)",
             where(rule_ptrs_.count(next) ? rule_ptrs_.at(next) : ""));
      }
      if (state[next] == 0) {
        state[next] = 1;
        auto e = left_edges_.find(next);
        stack.push_back({next, e == left_edges_.end() ? std::set<std::string>::const_iterator{} : e->second.begin()});
      }
    }
  }
}

int64_t SchemaConverter::count_keyword(const Json& schema, const char* key, const std::string& ptr) const {
  auto it = schema.find(key);
  if (it == schema.end()) return -1;
  const Json& v = *it;
  const double d = v.is_number() ? v.get<double>() : -1;
  if (d < 0 || d != std::floor(d)) fail("'{}' at {} must be a non-negative integer", key, where(ptr));
  if (d > limits_.max_repetition) {
    fail("'{}' {} at {} exceeds max_repetition ({})", key, v.dump(), where(ptr), limits_.max_repetition);
  }
  return static_cast<int64_t>(v.get<double>());
}

std::string json_schema_rules(const nlohmann::ordered_json& schema, std::string_view root_name,
                              const GrammarLimits& limits, const Deadline& deadline) {
  return SchemaConverter(schema, std::string(root_name), limits, deadline).convert();
}

std::string json_schema_rules(const nlohmann::json& schema, std::string_view root_name, const GrammarLimits& limits,
                              const Deadline& deadline) {
  return json_schema_rules(nlohmann::ordered_json(schema), root_name, limits, deadline);
}

std::string json_schema_to_gbnf(const nlohmann::ordered_json& schema, const GrammarLimits& limits,
                                const Deadline& deadline) {
  return json_schema_rules(schema, "root", limits, deadline);
}

std::string json_schema_to_gbnf(const nlohmann::json& schema, const GrammarLimits& limits, const Deadline& deadline) {
  return json_schema_rules(schema, "root", limits, deadline);
}

std::string json_object_gbnf() {
  const GrammarLimits limits;
  const Deadline deadline(std::chrono::milliseconds(60000));
  const Json empty = Json::object();
  return SchemaConverter(empty, "root", limits, deadline).any_object_rules();
}

}  // namespace tokenmill::grammar
