// jinja2's tests (`x is defined`, `n is divisibleby 3`, ...).
#include <fmt/format.h>

#include <cmath>
#include <unordered_map>

#include "jinja/render.h"

namespace tokenmill::jinja {
namespace {

using TestFn = bool (*)(const Value&, CallArgs&);

bool int_like(const Value& v) { return v.kind == Value::Kind::kInt || v.kind == Value::Kind::kBool; }

int64_t test_int(const Value& v) {
  if (!int_like(v)) fail_render(fmt::format("expected an integer, got '{}'", v.type_name()));
  return v.kind == Value::Kind::kBool ? v.b : v.i;
}

// Python's `value % divisor == 0`, for ints and floats.
bool divisible(const Value& v, const Value& d) {
  if (!v.is_number() || !d.is_number())
    fail_render(fmt::format("unsupported operand type(s) for %: '{}' and '{}'", v.type_name(), d.type_name()));
  if (d.as_double() == 0) fail_render("integer division or modulo by zero");
  if (v.kind != Value::Kind::kFloat && d.kind != Value::Kind::kFloat) return test_int(v) % test_int(d) == 0;
  return std::fmod(v.as_double(), d.as_double()) == 0;
}

// jinja2's `value % 2 == 1` (3.5 is neither odd nor even).
bool is_odd(const Value& v) {
  if (!v.is_number()) fail_render(fmt::format("unsupported operand type(s) for %: '{}' and 'int'", v.type_name()));
  if (v.kind != Value::Kind::kFloat) return (test_int(v) % 2 + 2) % 2 == 1;
  double m = std::fmod(v.f, 2.0);
  if (m < 0) m += 2.0;
  return m == 1.0;
}

bool ordered(const Value& v, CallArgs& a, bool (*pred)(int)) {
  const Value other = a.get(0, "other");
  if (v.is_undefined() || other.is_undefined()) fail_render(undefined_message(v.is_undefined() ? v : other));
  return pred(compare_values(v, other));
}

bool same_as(const Value& v, CallArgs& a) {
  const Value o = a.get(0, "other");
  if (v.kind != o.kind) return false;
  switch (v.kind) {
    case Value::Kind::kList: return v.list == o.list;
    case Value::Kind::kDict: return v.dict == o.dict;
    case Value::Kind::kCallable: return v.callable == o.callable;
    default: return values_equal(v, o);
  }
}

// jinja2's str(value).islower() / .isupper(): any value, by its text.
bool case_test(const Value& v, bool lower) {
  const std::string text = to_str(v);
  bool cased = false;
  for (char c : text) {
    if ((lower && c >= 'A' && c <= 'Z') || (!lower && c >= 'a' && c <= 'z')) return false;
    cased = cased || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
  }
  return cased;
}

const std::unordered_map<std::string, TestFn>& test_table() {
  static const auto* table = new std::unordered_map<std::string, TestFn>{
      {"defined", [](const Value& v, CallArgs&) { return !v.is_undefined(); }},
      {"undefined", [](const Value& v, CallArgs&) { return v.is_undefined(); }},
      {"none", [](const Value& v, CallArgs&) { return v.is_none(); }},
      {"string", [](const Value& v, CallArgs&) { return v.is_string(); }},
      {"number", [](const Value& v, CallArgs&) { return v.is_number(); }},
      {"integer", [](const Value& v, CallArgs&) { return v.kind == Value::Kind::kInt; }},
      {"float", [](const Value& v, CallArgs&) { return v.kind == Value::Kind::kFloat; }},
      {"boolean", [](const Value& v, CallArgs&) { return v.kind == Value::Kind::kBool; }},
      {"true", [](const Value& v, CallArgs&) { return v.kind == Value::Kind::kBool && v.b; }},
      {"false", [](const Value& v, CallArgs&) { return v.kind == Value::Kind::kBool && !v.b; }},
      {"mapping", [](const Value& v, CallArgs&) { return v.is_dict() && !v.dict->is_namespace; }},
      {"iterable",
       [](const Value& v, CallArgs&) { return v.is_list() || v.is_dict() || v.is_string() || v.is_undefined(); }},
      {"sequence", [](const Value& v, CallArgs&) { return v.is_list() || v.is_dict() || v.is_string(); }},
      {"callable", [](const Value& v, CallArgs&) { return v.is_callable(); }},
      {"even", [](const Value& v, CallArgs&) { return divisible(v, Value::integer(2)); }},
      {"odd", [](const Value& v, CallArgs&) { return is_odd(v); }},
      {"divisibleby", [](const Value& v, CallArgs& a) { return divisible(v, a.get(0, "num")); }},
      {"eq", [](const Value& v, CallArgs& a) { return values_equal(v, a.get(0, "other")); }},
      {"ne", [](const Value& v, CallArgs& a) { return !values_equal(v, a.get(0, "other")); }},
      {"lt", [](const Value& v, CallArgs& a) { return ordered(v, a, [](int c) { return c < 0; }); }},
      {"gt", [](const Value& v, CallArgs& a) { return ordered(v, a, [](int c) { return c > 0; }); }},
      {"le", [](const Value& v, CallArgs& a) { return ordered(v, a, [](int c) { return c <= 0; }); }},
      {"ge", [](const Value& v, CallArgs& a) { return ordered(v, a, [](int c) { return c >= 0; }); }},
      {"sameas", same_as},
      {"lower", [](const Value& v, CallArgs&) { return case_test(v, true); }},
      {"upper", [](const Value& v, CallArgs&) { return case_test(v, false); }},
      {"in", [](const Value& v, CallArgs& a) { return contains(a.get(0, "seq"), v); }},
      {"escaped", [](const Value&, CallArgs&) { return false; }},
  };
  return *table;
}

std::string test_alias(const std::string& name) {
  if (name == "equalto" || name == "==") return "eq";
  if (name == "!=") return "ne";
  if (name == "lessthan" || name == "<") return "lt";
  if (name == "greaterthan" || name == ">") return "gt";
  if (name == "<=") return "le";
  if (name == ">=") return "ge";
  return name;
}

}  // namespace

bool has_test(const std::string& name) { return test_table().count(test_alias(name)) != 0; }

bool apply_test(Renderer& r, const std::string& name, const Value& input, CallArgs& args) {
  r.tick();
  const auto& table = test_table();
  const auto it = table.find(test_alias(name));
  if (it == table.end()) fail_render(fmt::format("No test named '{}'.", name));
  return it->second(input, args);
}

}  // namespace tokenmill::jinja
