// The values a template computes with: Python's types as chat templates use
// them (None, bool, int, float, str, list/tuple, dict, callables) plus
// jinja2's Undefined and namespace. Lists and dicts are shared by pointer, as
// Python shares them, so copying a Value is cheap; strings are copied.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace tokenmill::jinja {

class Renderer;
struct Value;
struct CallArgs;

struct List {
  std::vector<Value> items;
  bool is_tuple = false;  // prints as (a, b) instead of [a, b]
  // The result of a filter that is a Python generator in jinja2 (map, select,
  // reject, ...): always truthy, no len(), no indexing, not JSON-serializable,
  // so that templates relying on those errors fail here as they do there.
  bool is_iterator = false;
  int depth = 1;  // nesting of containers, bounded so that printing and freeing cannot exhaust the stack
  // Memory the items hold (strings are copied with their values, so
  // [s] * 1000 holds s a thousand times); bounded by Renderer::check_bytes.
  size_t bytes = 0;
};

// Insertion-ordered, as Python dicts are; chat-template dicts are small, so
// a linear search beats hashing.
struct Dict {
  std::vector<std::pair<Value, Value>> entries;
  bool is_namespace = false;  // the only object a template may assign attributes of
  int depth = 1;              // as List::depth
  size_t bytes = 0;           // as List::bytes (an estimate that may only over-count)

  const Value* find(const Value& key) const;
  const Value* find(std::string_view key) const;
  void set(Value key, Value value);
};

using BuiltinFn = std::function<Value(Renderer&, CallArgs&)>;

struct Callable {
  std::string name;
  BuiltinFn fn;
};

struct Value {
  enum class Kind : uint8_t { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kCallable };

  Kind kind = Kind::kUndefined;
  bool b = false;
  bool markup = false;  // a string marked safe (jinja2's Markup): `+` escapes plain strings joined to it
  int64_t i = 0;
  double f = 0;
  std::string s;
  std::shared_ptr<List> list;
  std::shared_ptr<Dict> dict;
  std::shared_ptr<const Callable> callable;

  static Value undefined() { return Value{}; }
  static Value none() { return make(Kind::kNone); }
  static Value boolean(bool v);
  static Value integer(int64_t v);
  static Value floating(double v);
  static Value string(std::string v);
  static Value new_list(std::vector<Value> items = {}, bool is_tuple = false);
  static Value new_iterator(std::vector<Value> items);
  // A tuple (k, v) with its nesting depth set.
  static Value pair(const Value& first, const Value& second);
  static Value new_dict();
  static Value function(std::string name, BuiltinFn fn);
  static Value from_json(const nlohmann::ordered_json& json);

  bool is_undefined() const { return kind == Kind::kUndefined; }
  bool is_none() const { return kind == Kind::kNone; }
  bool is_string() const { return kind == Kind::kString; }
  bool is_list() const { return kind == Kind::kList; }
  bool is_dict() const { return kind == Kind::kDict; }
  bool is_number() const { return kind == Kind::kInt || kind == Kind::kFloat || kind == Kind::kBool; }
  bool is_callable() const { return kind == Kind::kCallable; }
  double as_double() const { return kind == Kind::kFloat ? f : static_cast<double>(kind == Kind::kBool ? b : i); }

  bool truthy() const;
  // Container nesting: 0 for scalars.
  int depth() const { return kind == Kind::kList ? list->depth : (kind == Kind::kDict ? dict->depth : 0); }
  // Memory held, roughly: the value itself plus its string or items.
  size_t bytes() const {
    return sizeof(Value) + (kind == Kind::kString
                                ? s.size()
                                : (kind == Kind::kList ? list->bytes : (kind == Kind::kDict ? dict->bytes : 0)));
  }
  // Python's len(); -1 for values without one.
  int64_t length() const;
  const char* type_name() const;

 private:
  static Value make(Kind k) {
    Value v;
    v.kind = k;
    return v;
  }
};

struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keywords;
  int line = 0;
  int column = 0;

  // The argument at `index`, or the keyword `name`, or undefined.
  Value get(size_t index, std::string_view name) const;
  bool has(size_t index, std::string_view name) const;
};

// Appends to a list value, keeping its nesting depth.
inline void push_item(Value& list, Value item) {
  list.list->depth = std::max(list.list->depth, item.depth() + 1);
  list.list->bytes += item.bytes();
  list.list->items.push_back(std::move(item));
}

// Python semantics of ==, <, str(), repr() and json.dumps (value_print.cc).
bool values_equal(const Value& a, const Value& b);
// -1, 0, 1; throws TemplateError-free std::invalid_argument for unorderable types.
int compare_values(const Value& a, const Value& b);
std::string to_str(const Value& v);
std::string to_repr(const Value& v);
// Printing is bounded: a repr or JSON text longer than the current thread's
// print limit throws std::length_error (a list of a million references to
// one long string is small in memory but huge as text). A Renderer sets the
// limit to max_output_bytes for the duration of its render (PrintLimitScope).
class PrintLimitScope {
 public:
  explicit PrintLimitScope(size_t max_bytes);
  ~PrintLimitScope();
  PrintLimitScope(const PrintLimitScope&) = delete;
  PrintLimitScope& operator=(const PrintLimitScope&) = delete;

 private:
  size_t saved_;
};

// The current thread's print limit (max_output_bytes while a render runs).
size_t current_print_limit();
// Whether containers of `bytes` are over the bound of a render whose
// output may take max_output_bytes: 4 x that, and never under 1 MiB.
bool container_bytes_exceed(size_t bytes, size_t max_output_bytes);
// Throws a kLimit TemplateError when `count` values made at once (a
// string's characters, a split's parts) would hold more memory than any
// container may (4 x the print limit, as Renderer::check_bytes).
void check_values_fit(size_t count);

// Throws std::invalid_argument past kMaxPrintDepth levels (a namespace may contain itself).
inline constexpr int kMaxPrintDepth = 1000;
void append_repr(std::string& out, const Value& v, int level = 0);
std::string format_python_float(double d);

struct JsonStyle {
  int indent = -1;  // < 0: none
  std::string item_separator = ", ";
  std::string key_separator = ": ";
  bool sort_keys = false;
  bool ensure_ascii = false;  // \uXXXX for every non-ASCII code point (surrogate pairs above U+FFFF)
};
void append_json(std::string& out, const Value& v, const JsonStyle& style, int level = 0);

}  // namespace tokenmill::jinja
