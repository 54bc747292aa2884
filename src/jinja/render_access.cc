// Attribute, item and slice access. The sandbox lives here: a template
// reaches only dict keys, list/string items and the whitelisted methods of
// string_methods.cc; names starting with '_' are refused as jinja2's
// sandbox refuses them, and mutating methods are refused as its immutable
// sandbox refuses them.
#include <fmt/format.h>

#include "jinja/render.h"

namespace tokenmill::jinja {

std::vector<std::string> split_code_points(const std::string& s) {
  std::vector<std::string> out;
  out.reserve(s.size());
  for (size_t n = 0; n < s.size();) {
    size_t len = 1;
    const auto c = static_cast<unsigned char>(s[n]);
    if (c >= 0xF0) {
      len = 4;
    } else if (c >= 0xE0) {
      len = 3;
    } else if (c >= 0xC0) {
      len = 2;
    }
    len = std::min(len, s.size() - n);
    out.push_back(s.substr(n, len));
    n += len;
  }
  return out;
}

std::vector<Value> iterate(const Value& v) {
  std::vector<Value> out;
  if (v.is_list()) return v.list->items;
  if (v.is_dict()) {
    out.reserve(v.dict->entries.size());
    for (const auto& kv : v.dict->entries) out.push_back(kv.first);
  } else if (v.is_string()) {
    check_values_fit(v.s.size());  // bytes bound the characters
    for (std::string& ch : split_code_points(v.s)) out.push_back(Value::string(std::move(ch)));
  } else if (!v.is_undefined()) {
    fail_render(fmt::format("'{}' object is not iterable", v.type_name()));
  }
  return out;
}

bool contains(const Value& container, const Value& item) {
  if (container.is_string()) {
    if (!item.is_string())
      fail_render(fmt::format("'in <string>' requires string as left operand, not {}", item.type_name()));
    return container.s.find(item.s) != std::string::npos;
  }
  if (container.is_list()) {
    for (const Value& v : container.list->items) {
      if (values_equal(v, item)) return true;
    }
    return false;
  }
  if (container.is_dict()) return container.dict->find(item) != nullptr;
  if (container.is_undefined()) return false;
  fail_render(fmt::format("argument of type '{}' is not iterable", container.type_name()));
}

Value get_attribute(const Value& object, const std::string& name) {
  if (!name.empty() && name[0] == '_') {
    fail_render(fmt::format("access to attribute '{}' of '{}' object is unsafe.", name, object.type_name()));
  }
  switch (object.kind) {
    case Value::Kind::kUndefined: fail_render(undefined_message(object));
    case Value::Kind::kDict: {
      if (!object.dict->is_namespace) {
        Value method = dict_method(object, name);
        if (!method.is_undefined()) return method;
      }
      if (const Value* v = object.dict->find(std::string_view(name))) return *v;
      return make_undefined(
          fmt::format("'{}' has no attribute '{}'", object.dict->is_namespace ? "Namespace" : "dict object", name));
    }
    case Value::Kind::kString: {
      Value method = string_method(object, name);
      if (!method.is_undefined()) return method;
      break;
    }
    case Value::Kind::kList: {
      Value method = list_method(object, name);
      if (!method.is_undefined()) return method;
      break;
    }
    default: break;
  }
  return make_undefined(fmt::format("'{}' object has no attribute '{}'", object.type_name(), name));
}

namespace {

bool index_of(const Value& key, int64_t size, int64_t& index) {
  if (key.kind != Value::Kind::kInt && key.kind != Value::Kind::kBool) return false;
  index = key.kind == Value::Kind::kBool ? key.b : key.i;
  if (index < 0) index += size;
  return index >= 0 && index < size;
}

// Python's slice.indices(): the positions a[start:stop:step] selects.
std::vector<int64_t> slice_positions(int64_t size, const Value& start, const Value& stop, const Value& step) {
  auto as_int = [](const Value& v, const char* what) -> int64_t {
    if (v.kind == Value::Kind::kInt) return v.i;
    if (v.kind == Value::Kind::kBool) return v.b;
    fail_render(fmt::format("slice {} must be an integer or None", what));
  };
  const int64_t st = step.is_none() || step.is_undefined() ? 1 : as_int(step, "step");
  if (st == 0) fail_render("slice step cannot be zero");
  auto clamp = [&](const Value& v, int64_t def) {
    if (v.is_none() || v.is_undefined()) return def;
    int64_t x = as_int(v, "index");
    if (x < 0) x += size;
    if (st > 0) return std::clamp<int64_t>(x, 0, size);
    return std::clamp<int64_t>(x, -1, size - 1);
  };
  const int64_t a = clamp(start, st > 0 ? 0 : size - 1);
  const int64_t b = clamp(stop, st > 0 ? size : -1);
  std::vector<int64_t> out;
  for (int64_t i = a; st > 0 ? i < b : i > b; i += st) out.push_back(i);
  return out;
}

}  // namespace

Value get_item(const Value& object, const Value& key) {
  int64_t index;
  switch (object.kind) {
    case Value::Kind::kUndefined: fail_render(undefined_message(object));
    case Value::Kind::kDict:
      if (const Value* v = object.dict->find(key)) return *v;
      if (key.is_string()) return get_attribute(object, key.s);
      return make_undefined(fmt::format("'dict object' has no attribute {}", to_repr(key)));
    case Value::Kind::kList:
      if (object.list->is_iterator) fail_render("'generator' object is not subscriptable");
      if (index_of(key, static_cast<int64_t>(object.list->items.size()), index)) {
        return object.list->items[static_cast<size_t>(index)];
      }
      break;
    case Value::Kind::kString: {
      if (key.is_string()) return get_attribute(object, key.s);
      const std::vector<std::string> chars = split_code_points(object.s);
      if (index_of(key, static_cast<int64_t>(chars.size()), index))
        return Value::string(chars[static_cast<size_t>(index)]);
      break;
    }
    default: break;
  }
  if (key.is_string()) return get_attribute(object, key.s);
  return make_undefined(fmt::format("'{}' object has no element {}", object.type_name(), to_repr(key)));
}

Value slice_value(const Value& object, const Value& start, const Value& stop, const Value& step) {
  if (object.is_list() && object.list->is_iterator) fail_render("'generator' object is not subscriptable");
  if (object.is_list()) {
    const auto& items = object.list->items;
    Value out = Value::new_list({}, object.list->is_tuple);
    for (int64_t i : slice_positions(static_cast<int64_t>(items.size()), start, stop, step)) {
      push_item(out, items[static_cast<size_t>(i)]);
    }
    return out;
  }
  if (object.is_string()) {
    const std::vector<std::string> chars = split_code_points(object.s);
    std::string out;
    for (int64_t i : slice_positions(static_cast<int64_t>(chars.size()), start, stop, step)) {
      out += chars[static_cast<size_t>(i)];
    }
    return Value::string(std::move(out));
  }
  if (object.is_undefined()) fail_render(undefined_message(object));
  // jinja2's sandbox turns a failed subscript into an undefined value.
  return make_undefined(fmt::format("'{}' object is not subscriptable", object.type_name()));
}

}  // namespace tokenmill::jinja
