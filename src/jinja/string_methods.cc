// The Python methods of str, dict and list that chat templates call, bound
// to their object. Mutating methods are refused, as jinja2's
// ImmutableSandboxedEnvironment (what Hugging Face renders with) refuses them.
#include <fmt/format.h>

#include "jinja/render.h"
#include "jinja/string_util.h"

namespace tokenmill::jinja {
namespace {

[[noreturn]] void unsafe(const Value& self, const std::string& name) {
  fail_render(fmt::format("access to attribute '{}' of '{}' object is unsafe.", name, self.type_name()));
}

std::string str_arg(const CallArgs& args, size_t index, std::string_view name, const char* method) {
  const Value v = args.get(index, name);
  if (!v.is_string()) fail_render(fmt::format("{}() argument must be str, not {}", method, v.type_name()));
  return v.s;
}

int64_t int_arg(const CallArgs& args, size_t index, std::string_view name, int64_t def) {
  const Value v = args.get(index, name);
  if (v.is_undefined() || v.is_none()) return def;
  if (v.kind == Value::Kind::kInt) return v.i;
  if (v.kind == Value::Kind::kBool) return v.b;
  fail_render(fmt::format("'{}' object cannot be interpreted as an integer", v.type_name()));
}

Value strings_to_list(std::vector<std::string> parts) {
  check_values_fit(parts.size());
  Value out = Value::new_list();
  out.list->items.reserve(parts.size());
  for (std::string& p : parts) push_item(out, Value::string(std::move(p)));
  return out;
}

bool affix_matches(const Value& self, const Value& affix, bool prefix) {
  auto one = [&](const std::string& a) {
    if (a.size() > self.s.size()) return false;
    return prefix ? self.s.compare(0, a.size(), a) == 0 : self.s.compare(self.s.size() - a.size(), a.size(), a) == 0;
  };
  if (affix.is_string()) return one(affix.s);
  if (affix.is_list()) {
    for (const Value& a : affix.list->items) {
      if (a.is_string() && one(a.s)) return true;
    }
    return false;
  }
  fail_render("startswith/endswith first arg must be str or a tuple of str");
}

Value find_in(const Value& self, const CallArgs& args, bool reverse, bool must_find) {
  const std::string needle = str_arg(args, 0, "sub", "find");
  const size_t at = reverse ? self.s.rfind(needle) : self.s.find(needle);
  if (at == std::string::npos) {
    if (must_find) fail_render("substring not found");
    return Value::integer(-1);
  }
  return Value::integer(code_point_count(std::string_view(self.s).substr(0, at)));
}

std::string join_strings(const std::vector<Value>& parts, const std::string& sep, Renderer& r) {
  std::string out;
  for (size_t n = 0; n < parts.size(); ++n) {
    if (!parts[n].is_string())
      fail_render(fmt::format("sequence item {}: expected str instance, {} found", n, parts[n].type_name()));
    if (n > 0) out += sep;
    out += parts[n].s;
    r.check_size(out.size());
  }
  return out;
}

Value str_call(const Value& self, const std::string& name, CallArgs& args, Renderer& r) {
  const std::string& s = self.s;
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    const Value chars = args.get(0, "chars");
    const bool left = name != "rstrip", right = name != "lstrip";
    return Value::string(strip_chars(s, chars.is_string() ? &chars.s : nullptr, left, right));
  }
  if (name == "split" || name == "rsplit") {
    const Value sep = args.get(0, "sep");
    if (!sep.is_undefined() && !sep.is_none() && !sep.is_string()) fail_render("split() separator must be str or None");
    if (sep.is_string() && sep.s.empty()) fail_render("empty separator");
    const int64_t max = int_arg(args, 1, "maxsplit", -1);
    return strings_to_list(python_split(s, sep.is_string() ? &sep.s : nullptr, max, name == "rsplit"));
  }
  if (name == "startswith" || name == "endswith")
    return Value::boolean(affix_matches(self, args.get(0, "prefix"), name == "startswith"));
  if (name == "replace") {
    std::string out = replace_all(s, str_arg(args, 0, "old", "replace"), str_arg(args, 1, "new", "replace"),
                                  int_arg(args, 2, "count", -1), r.limits().max_output_bytes);
    return Value::string(std::move(out));
  }
  if (name == "upper") return Value::string(to_upper(s));
  if (name == "lower") return Value::string(to_lower(s));
  if (name == "title") return Value::string(python_title(s));
  if (name == "capitalize") return Value::string(capitalize(s));
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex") {
    return find_in(self, args, name[0] == 'r', name.find("index") != std::string::npos);
  }
  if (name == "count") return Value::integer(count_occurrences(s, str_arg(args, 0, "sub", "count")));
  if (name == "join") return Value::string(join_strings(iterate(args.get(0, "iterable")), s, r));
  if (name == "format") return Value::string(python_format(s, args));
  if (name == "splitlines") return strings_to_list(split_lines(s, args.get(0, "keepends").truthy()));
  if (name == "zfill") return Value::string(zfill(s, int_arg(args, 0, "width", 0)));
  if (name == "center") {
    const Value fill = args.get(1, "fillchar");
    return Value::string(
        center(s, int_arg(args, 0, "width", 0), r.limits().max_output_bytes, fill.is_string() ? fill.s : " "));
  }
  return Value::boolean(char_class_test(s, name));
}

const char* const kStringMethods[] = {"strip",    "lstrip",     "rstrip",  "split",   "rsplit",    "startswith",
                                      "endswith", "replace",    "upper",   "lower",   "title",     "capitalize",
                                      "find",     "rfind",      "index",   "rindex",  "count",     "join",
                                      "format",   "splitlines", "zfill",   "center",  "isdigit",   "isalpha",
                                      "isspace",  "isalnum",    "islower", "isupper", "isnumeric", "isdecimal"};

Value bind(const Value& self, const std::string& name,
           Value (*fn)(const Value&, const std::string&, CallArgs&, Renderer&)) {
  return Value::function(name, [self, name, fn](Renderer& r, CallArgs& args) { return fn(self, name, args, r); });
}

Value dict_call(const Value& self, const std::string& name, CallArgs& args, Renderer&) {
  if (name == "get") {
    const Value* v = self.dict->find(args.get(0, "key"));
    if (v != nullptr) return *v;
    return args.has(1, "default") ? args.get(1, "default") : Value::none();
  }
  if (name == "copy") {
    Value out = Value::new_dict();
    out.dict->entries = self.dict->entries;
    out.dict->depth = self.dict->depth;
    return out;
  }
  Value out = Value::new_list();
  for (const auto& [k, v] : self.dict->entries) {
    if (name == "keys") {
      push_item(out, k);
    } else if (name == "values") {
      push_item(out, v);
    } else {
      push_item(out, Value::pair(k, v));
    }
  }
  out.list->depth = self.dict->depth + 1;
  return out;
}

Value list_call(const Value& self, const std::string& name, CallArgs& args, Renderer&) {
  const Value x = args.get(0, "value");
  const auto& items = self.list->items;
  if (name == "copy") return Value::new_list(items);
  int64_t count = 0;
  for (size_t n = 0; n < items.size(); ++n) {
    if (!values_equal(items[n], x)) continue;
    if (name == "index") return Value::integer(static_cast<int64_t>(n));
    ++count;
  }
  if (name == "index") fail_render(fmt::format("{} is not in list", to_repr(x)));
  return Value::integer(count);
}

}  // namespace

Value string_method(const Value& self, const std::string& name) {
  for (const char* m : kStringMethods) {
    if (name == m) return bind(self, name, str_call);
  }
  return Value::undefined();
}

Value dict_method(const Value& self, const std::string& name) {
  if (name == "items" || name == "keys" || name == "values" || name == "get" || name == "copy") {
    return bind(self, name, dict_call);
  }
  if (name == "pop" || name == "update" || name == "setdefault" || name == "clear" || name == "popitem") {
    unsafe(self, name);
  }
  return Value::undefined();
}

Value list_method(const Value& self, const std::string& name) {
  if (name == "index" || name == "count" || name == "copy") return bind(self, name, list_call);
  if (name == "append" || name == "extend" || name == "insert" || name == "pop" || name == "remove" ||
      name == "reverse" || name == "sort" || name == "clear") {
    unsafe(self, name);
  }
  return Value::undefined();
}

}  // namespace tokenmill::jinja
