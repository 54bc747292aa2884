// jinja2's built-in filters on text and numbers, and the name table of all
// filters (the sequence filters live in filters_sequence.cc).
#include "jinja/filters.h"

#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <unordered_map>

#include "jinja/string_util.h"

namespace tokenmill::jinja {
namespace {

std::string text_of(const Value& v) { return to_str(v); }

Value filter_length(Renderer&, const Value& v, CallArgs&) {
  const int64_t n = v.length();
  if (n < 0) fail_render(fmt::format("object of type '{}' has no len()", v.type_name()));
  return Value::integer(n);
}

Value filter_default(Renderer&, const Value& v, CallArgs& a) {
  const bool boolean = a.get(1, "boolean").truthy();
  if (v.is_undefined() || (boolean && !v.truthy()))
    return a.has(0, "default_value") ? a.get(0, "default_value") : Value::string("");
  return v;
}

Value filter_first(Renderer&, const Value& v, CallArgs&) {
  std::vector<Value> items = iterate(v);
  return items.empty() ? make_undefined("No first item, sequence was empty.") : items.front();
}

Value filter_last(Renderer&, const Value& v, CallArgs&) {
  if (v.is_list() && v.list->is_iterator) fail_render("'generator' object is not reversible");
  std::vector<Value> items = iterate(v);
  return items.empty() ? make_undefined("No last item, sequence was empty.") : items.back();
}

// jinja2 3.1's indent: width may be a string; blank lines stay empty unless blank=true.
Value filter_indent(Renderer& r, const Value& v, CallArgs& a) {
  // jinja2 appends "\n" to the value first, which fails for anything but a string.
  if (!v.is_string()) fail_render(fmt::format("unsupported operand type(s) for +=: '{}' and 'str'", v.type_name()));
  const Value w = a.get(0, "width");
  std::string pad =
      w.is_string()
          ? w.s
          : std::string(static_cast<size_t>(std::clamp<int64_t>(w.is_undefined() ? 4 : w.i, 0, 1 << 16)), ' ');
  const std::vector<std::string> lines = split_lines(text_of(v) + "\n", false);
  std::string out;
  for (size_t n = 0; n < lines.size(); ++n) {
    if (n > 0) {
      out += '\n';
      if (a.get(2, "blank").truthy() || !lines[n].empty()) out += pad;
    }
    out += lines[n];
    r.check_size(out.size());
  }
  if (a.get(1, "first").truthy()) out = pad + out;
  return Value::string(std::move(out));
}

Value filter_int(Renderer&, const Value& v, CallArgs& a) {
  const Value def = a.has(0, "default") ? a.get(0, "default") : Value::integer(0);
  if (v.kind == Value::Kind::kInt) return v;
  if (v.kind == Value::Kind::kBool) return Value::integer(v.b);
  if (v.kind == Value::Kind::kFloat) return std::isfinite(v.f) ? Value::integer(static_cast<int64_t>(v.f)) : def;
  if (!v.is_string()) return def;
  const std::string s = strip_chars(v.s, nullptr, true, true);
  try {
    size_t used = 0;
    const long long i = std::stoll(s, &used, 10);
    if (used == s.size()) return Value::integer(i);
    const double d = std::stod(s, &used);
    if (used == s.size() && std::isfinite(d)) return Value::integer(static_cast<int64_t>(d));
  } catch (const std::exception&) {
  }
  return def;
}

Value filter_float(Renderer&, const Value& v, CallArgs& a) {
  const Value def = a.has(0, "default") ? a.get(0, "default") : Value::floating(0);
  if (v.is_number()) return Value::floating(v.as_double());
  if (!v.is_string()) return def;
  const std::string s = strip_chars(v.s, nullptr, true, true);
  try {
    size_t used = 0;
    const double d = std::stod(s, &used);
    if (used == s.size()) return Value::floating(d);
  } catch (const std::exception&) {
  }
  return def;
}

Value filter_round(Renderer&, const Value& v, CallArgs& a) {
  if (!v.is_number()) fail_render("round requires a number");
  const int64_t precision = a.get(0, "precision").kind == Value::Kind::kInt ? a.get(0, "precision").i : 0;
  const Value method = a.get(1, "method");
  const bool common = !method.is_string() || method.s == "common";
  if (common && v.kind != Value::Kind::kFloat)
    return Value::integer(v.kind == Value::Kind::kBool ? v.b : v.i);  // round(int) is an int
  if (common && precision >= 0 && precision <= 20) {
    // printf rounds the exact binary value half-to-even, as Python's round() does.
    char buf[512];
    std::snprintf(buf, sizeof buf, "%.*f", static_cast<int>(precision), v.as_double());
    return Value::floating(std::strtod(buf, nullptr));
  }
  const double scale = std::pow(10.0, static_cast<double>(precision));
  const double x = v.as_double() * scale;
  double rounded = std::nearbyint(x);
  if (method.is_string() && method.s == "floor") rounded = std::floor(x);
  if (method.is_string() && method.s == "ceil") rounded = std::ceil(x);
  return Value::floating(rounded / scale);
}

Value filter_abs(Renderer&, const Value& v, CallArgs&) {
  if (v.kind == Value::Kind::kFloat) return Value::floating(std::fabs(v.f));
  if (v.kind == Value::Kind::kInt) return Value::integer(v.i < 0 ? -v.i : v.i);
  if (v.kind == Value::Kind::kBool) return Value::integer(v.b);
  fail_render(fmt::format("bad operand type for abs(): '{}'", v.type_name()));
}

Value filter_escape(Renderer&, const Value& v, CallArgs&) {
  if (v.is_string() && v.markup) return v;
  std::string out;
  for (const char c : text_of(v)) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  Value result = Value::string(std::move(out));
  result.markup = true;
  return result;
}

Value filter_list(Renderer&, const Value& v, CallArgs&) {
  if (!v.is_list() && !v.is_dict() && !v.is_string() && !v.is_undefined()) {
    fail_render(fmt::format("'{}' object is not iterable", v.type_name()));
  }
  return Value::new_list(iterate(v));
}

Value filter_items(Renderer&, const Value& v, CallArgs&) {
  Value out = Value::new_list();
  if (v.is_undefined()) return out;
  if (!v.is_dict()) fail_render("items requires a mapping");
  for (const auto& [k, x] : v.dict->entries) push_item(out, Value::pair(k, x));
  out.list->is_iterator = true;  // jinja2 3.1's items filter is a generator
  out.list->depth = v.dict->depth + 1;
  return out;
}

Value filter_reverse(Renderer&, const Value& v, CallArgs&) {
  if (v.is_string()) {
    std::vector<std::string> cps = split_code_points(v.s);
    std::string out;
    for (auto it = cps.rbegin(); it != cps.rend(); ++it) out += *it;
    return Value::string(std::move(out));
  }
  std::vector<Value> items = iterate(v);
  // reversed() of a list is an iterator in jinja2; of anything else, a list.
  if (v.is_list() && !v.list->is_iterator) return Value::new_iterator({items.rbegin(), items.rend()});
  return Value::new_list({items.rbegin(), items.rend()});
}

Value filter_replace(Renderer& r, const Value& v, CallArgs& a) {
  const Value count = a.get(2, "count");
  return Value::string(replace_all(text_of(v), text_of(a.get(0, "old")), text_of(a.get(1, "new")),
                                   count.kind == Value::Kind::kInt ? count.i : -1, r.limits().max_output_bytes));
}

// jinja2's title filter: capitalises after runs of whitespace, '-', and opening brackets.
Value filter_title(Renderer&, const Value& v, CallArgs&) {
  std::string out;
  bool word_start = true;
  for (const std::string& cp : split_code_points(text_of(v))) {
    const char c = cp[0];
    if (cp.size() == 1 && (is_python_space(c) || c == '-' || c == '(' || c == '{' || c == '[' || c == '<')) {
      word_start = true;
      out += cp;
      continue;
    }
    out += word_start ? to_upper(cp) : to_lower(cp);
    word_start = false;
  }
  return Value::string(std::move(out));
}

Value filter_wordcount(Renderer&, const Value& v, CallArgs&) {
  int64_t words = 0;
  bool in_word = false;
  for (const char c : text_of(v)) {
    const auto u = static_cast<unsigned char>(c);
    const bool w =
        (u >= 0x80) || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    if (w && !in_word) ++words;
    in_word = w;
  }
  return Value::integer(words);
}

Value filter_format(Renderer& r, const Value& v, CallArgs& a) {
  if (!a.keywords.empty()) fail_render("format: keyword arguments are not supported");
  return Value::string(percent_format(text_of(v), a.positional, r.limits().max_output_bytes));
}

Value filter_trim(Renderer&, const Value& v, CallArgs& a) {
  const Value chars = a.get(0, "chars");
  return Value::string(strip_chars(to_str(v), chars.is_string() ? &chars.s : nullptr, true, true));
}

Value filter_center(Renderer& r, const Value& v, CallArgs& a) {
  const Value w = a.get(0, "width");
  return Value::string(center(to_str(v), w.kind == Value::Kind::kInt ? w.i : 80, r.limits().max_output_bytes));
}

// jinja2's truncate(length=255, killwords=False, end='...', leeway=5), by code points.
Value filter_truncate(Renderer&, const Value& v, CallArgs& a) {
  const std::vector<std::string> cps = split_code_points(text_of(v));
  const Value len_arg = a.get(0, "length"), leeway_arg = a.get(3, "leeway");
  const int64_t length = len_arg.kind == Value::Kind::kInt ? len_arg.i : 255;
  const int64_t leeway = leeway_arg.kind == Value::Kind::kInt ? leeway_arg.i : 5;
  const std::string end = a.has(2, "end") ? text_of(a.get(2, "end")) : "...";
  const int64_t end_len = code_point_count(end);
  if (length < end_len || leeway < 0) fail_render("truncate: length must be at least len(end), leeway at least 0");
  if (static_cast<int64_t>(cps.size()) <= length + leeway) return Value::string(text_of(v));
  std::string head;
  for (int64_t n = 0; n < length - end_len; ++n) head += cps[static_cast<size_t>(n)];
  if (!a.get(1, "killwords").truthy()) {
    const size_t space = head.rfind(' ');
    if (space != std::string::npos) head.resize(space);
  }
  return Value::string(head + end);
}

Value filter_attr(Renderer&, const Value& v, CallArgs& a) { return get_attribute(v, text_of(a.get(0, "name"))); }

const std::unordered_map<std::string, FilterFn>& filter_table() {
  static const auto* table = new std::unordered_map<std::string, FilterFn>{
      {"tojson", filter_tojson},
      {"length", filter_length},
      {"count", filter_length},
      {"join", filter_join},
      {"map", filter_map},
      {"select", filter_select},
      {"reject", filter_reject},
      {"selectattr", filter_selectattr},
      {"rejectattr", filter_rejectattr},
      {"default", filter_default},
      {"d", filter_default},
      {"first", filter_first},
      {"last", filter_last},
      {"unique", filter_unique},
      {"indent", filter_indent},
      {"int", filter_int},
      {"float", filter_float},
      {"round", filter_round},
      {"abs", filter_abs},
      {"escape", filter_escape},
      {"e", filter_escape},
      {"list", filter_list},
      {"items", filter_items},
      {"dictsort", filter_dictsort},
      {"sort", filter_sort},
      {"reverse", filter_reverse},
      {"min", filter_min},
      {"max", filter_max},
      {"sum", filter_sum},
      {"replace", filter_replace},
      {"title", filter_title},
      {"wordcount", filter_wordcount},
      {"batch", filter_batch},
      {"groupby", filter_groupby},
      {"truncate", filter_truncate},
      {"format", filter_format},
      {"attr", filter_attr},
      {"safe",
       [](Renderer&, const Value& v, CallArgs&) {
         Value out = Value::string(to_str(v));
         out.markup = true;
         return out;
       }},
      {"string", [](Renderer&, const Value& v, CallArgs&) { return Value::string(to_str(v)); }},
      {"trim", filter_trim},
      {"lower", [](Renderer&, const Value& v, CallArgs&) { return Value::string(to_lower(to_str(v))); }},
      {"upper", [](Renderer&, const Value& v, CallArgs&) { return Value::string(to_upper(to_str(v))); }},
      {"capitalize", [](Renderer&, const Value& v, CallArgs&) { return Value::string(capitalize(to_str(v))); }},
      {"center", filter_center},
  };
  return *table;
}

}  // namespace

Value apply_filter(Renderer& r, const std::string& name, const Value& input, CallArgs& args) {
  r.tick();
  const auto& table = filter_table();
  const auto it = table.find(name);
  if (it == table.end()) fail_render(fmt::format("No filter named '{}'.", name));
  return it->second(r, input, args);
}

}  // namespace tokenmill::jinja
