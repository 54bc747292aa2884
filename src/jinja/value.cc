#include "jinja/value.h"

#include <algorithm>
#include <stdexcept>

namespace tokenmill::jinja {

const Value* Dict::find(const Value& key) const {
  if (key.is_string()) return find(std::string_view(key.s));
  for (const auto& [k, v] : entries) {
    if (values_equal(k, key)) return &v;
  }
  return nullptr;
}

const Value* Dict::find(std::string_view key) const {
  for (const auto& [k, v] : entries) {
    if (k.kind == Value::Kind::kString && k.s == key) return &v;
  }
  return nullptr;
}

void Dict::set(Value key, Value value) {
  for (auto& [k, v] : entries) {
    if (values_equal(k, key)) {
      bytes = bytes - std::min(bytes, v.bytes()) + value.bytes();
      v = std::move(value);
      return;
    }
  }
  bytes += key.bytes() + value.bytes();
  entries.emplace_back(std::move(key), std::move(value));
}

Value Value::boolean(bool v) {
  Value r = make(Kind::kBool);
  r.b = v;
  return r;
}

Value Value::integer(int64_t v) {
  Value r = make(Kind::kInt);
  r.i = v;
  return r;
}

Value Value::floating(double v) {
  Value r = make(Kind::kFloat);
  r.f = v;
  return r;
}

Value Value::string(std::string v) {
  Value r = make(Kind::kString);
  r.s = std::move(v);
  return r;
}

Value Value::new_list(std::vector<Value> items, bool is_tuple) {
  Value r = make(Kind::kList);
  r.list = std::make_shared<List>();
  r.list->items = std::move(items);
  r.list->is_tuple = is_tuple;
  for (const Value& v : r.list->items) {
    r.list->depth = std::max(r.list->depth, v.depth() + 1);
    r.list->bytes += v.bytes();
  }
  return r;
}

Value Value::new_iterator(std::vector<Value> items) {
  Value r = new_list(std::move(items));
  r.list->is_iterator = true;
  return r;
}

Value Value::pair(const Value& first, const Value& second) {
  Value r = new_list({first, second}, true);
  r.list->depth = std::max(first.depth(), second.depth()) + 1;
  r.list->bytes = first.bytes() + second.bytes();
  return r;
}

Value Value::new_dict() {
  Value r = make(Kind::kDict);
  r.dict = std::make_shared<Dict>();
  return r;
}

Value Value::function(std::string name, BuiltinFn fn) {
  Value r = make(Kind::kCallable);
  r.callable = std::make_shared<const Callable>(Callable{std::move(name), std::move(fn)});
  return r;
}

Value Value::from_json(const nlohmann::ordered_json& json) {
  using T = nlohmann::ordered_json::value_t;
  switch (json.type()) {
    case T::null: return none();
    case T::boolean: return boolean(json.get<bool>());
    case T::number_integer: return integer(json.get<int64_t>());
    case T::number_unsigned: {
      const uint64_t u = json.get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) return floating(static_cast<double>(u));
      return integer(static_cast<int64_t>(u));
    }
    case T::number_float: return floating(json.get<double>());
    case T::string: return string(json.get<std::string>());
    case T::array: {
      Value r = new_list();
      r.list->items.reserve(json.size());
      for (const auto& e : json) {
        r.list->items.push_back(from_json(e));
        r.list->depth = std::max(r.list->depth, r.list->items.back().depth() + 1);
        r.list->bytes += r.list->items.back().bytes();
      }
      return r;
    }
    case T::object: {
      Value r = new_dict();
      r.dict->entries.reserve(json.size());
      for (const auto& [k, e] : json.items()) {
        r.dict->entries.emplace_back(string(k), from_json(e));
        r.dict->depth = std::max(r.dict->depth, r.dict->entries.back().second.depth() + 1);
        r.dict->bytes += k.size() + r.dict->entries.back().second.bytes();
      }
      return r;
    }
    default: return none();
  }
}

bool Value::truthy() const {
  switch (kind) {
    case Kind::kUndefined:
    case Kind::kNone: return false;
    case Kind::kBool: return b;
    case Kind::kInt: return i != 0;
    case Kind::kFloat: return f != 0;
    case Kind::kString: return !s.empty();
    case Kind::kList: return list->is_iterator || !list->items.empty();
    case Kind::kDict: return dict->is_namespace || !dict->entries.empty();
    case Kind::kCallable: return true;
  }
  return false;
}

int64_t Value::length() const {
  switch (kind) {
    case Kind::kUndefined: return 0;
    case Kind::kString: {
      int64_t n = 0;
      for (unsigned char c : s) n += (c & 0xC0) != 0x80;
      return n;
    }
    case Kind::kList: return list->is_iterator ? -1 : static_cast<int64_t>(list->items.size());
    case Kind::kDict: return static_cast<int64_t>(dict->entries.size());
    default: return -1;
  }
}

const char* Value::type_name() const {
  switch (kind) {
    case Kind::kUndefined: return "Undefined";
    case Kind::kNone: return "NoneType";
    case Kind::kBool: return "bool";
    case Kind::kInt: return "int";
    case Kind::kFloat: return "float";
    case Kind::kString: return "str";
    case Kind::kList: return list->is_iterator ? "generator" : (list->is_tuple ? "tuple" : "list");
    case Kind::kDict: return dict->is_namespace ? "Namespace" : "dict";
    case Kind::kCallable: return "function";
  }
  return "?";
}

Value CallArgs::get(size_t index, std::string_view name) const {
  if (index < positional.size()) return positional[index];
  for (const auto& [k, v] : keywords) {
    if (k == name) return v;
  }
  return Value::undefined();
}

bool CallArgs::has(size_t index, std::string_view name) const {
  if (index < positional.size()) return true;
  for (const auto& kv : keywords) {
    if (kv.first == name) return true;
  }
  return false;
}

bool values_equal(const Value& a, const Value& b) {
  using K = Value::Kind;
  if (a.is_number() && b.is_number()) {
    if (a.kind != K::kFloat && b.kind != K::kFloat)
      return a.as_double() == b.as_double() && (a.kind == K::kBool ? a.b : a.i) == (b.kind == K::kBool ? b.b : b.i);
    return a.as_double() == b.as_double();
  }
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case K::kUndefined:
    case K::kNone: return true;
    case K::kString: return a.s == b.s;
    case K::kList: {
      if (a.list == b.list) return true;
      if (a.list->items.size() != b.list->items.size()) return false;
      for (size_t n = 0; n < a.list->items.size(); ++n) {
        if (!values_equal(a.list->items[n], b.list->items[n])) return false;
      }
      return true;
    }
    case K::kDict: {
      if (a.dict == b.dict) return true;
      if (a.dict->is_namespace || b.dict->is_namespace) return false;  // Python compares Namespace by identity
      if (a.dict->entries.size() != b.dict->entries.size()) return false;
      for (const auto& [k, v] : a.dict->entries) {
        const Value* other = b.dict->find(k);
        if (other == nullptr || !values_equal(v, *other)) return false;
      }
      return true;
    }
    case K::kCallable: return a.callable == b.callable;
    default: return false;
  }
}

int compare_values(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    const double x = a.as_double(), y = b.as_double();
    if (a.kind != Value::Kind::kFloat && b.kind != Value::Kind::kFloat) {
      const int64_t p = a.kind == Value::Kind::kBool ? a.b : a.i;
      const int64_t q = b.kind == Value::Kind::kBool ? b.b : b.i;
      return p < q ? -1 : (p > q ? 1 : 0);
    }
    return x < y ? -1 : (x > y ? 1 : 0);
  }
  if (a.is_string() && b.is_string()) {
    const int c = a.s.compare(b.s);
    return c < 0 ? -1 : (c > 0 ? 1 : 0);
  }
  if (a.is_list() && b.is_list()) {
    const auto& x = a.list->items;
    const auto& y = b.list->items;
    for (size_t n = 0; n < x.size() && n < y.size(); ++n) {
      if (!values_equal(x[n], y[n])) return compare_values(x[n], y[n]);
    }
    return x.size() < y.size() ? -1 : (x.size() > y.size() ? 1 : 0);
  }
  throw std::invalid_argument(std::string("'<' not supported between instances of '") + a.type_name() + "' and '" +
                              b.type_name() + "'");
}

}  // namespace tokenmill::jinja
