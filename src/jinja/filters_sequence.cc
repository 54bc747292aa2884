// Filters over sequences: map, select/reject(attr), sort, dictsort, unique,
// min/max, sum, join, batch, and tojson.
#include <fmt/format.h>

#include <algorithm>

#include "jinja/filters.h"
#include "jinja/string_util.h"

namespace tokenmill::jinja {

Value follow_attribute(const Value& v, const Value& path) {
  if (!path.is_string()) return get_item(v, path);
  Value cur = v;
  size_t start = 0;
  while (true) {
    const size_t dot = path.s.find('.', start);
    const std::string part = path.s.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    const bool numeric = !part.empty() && part.find_first_not_of("0123456789") == std::string::npos;
    cur = numeric ? get_item(cur, Value::integer(std::stoll(part))) : get_item(cur, Value::string(part));
    if (dot == std::string::npos) return cur;
    start = dot + 1;
  }
}

Value sort_key(const Value& v, bool case_sensitive) {
  if (case_sensitive || !v.is_string()) return v;
  return Value::string(to_lower(v.s));
}

namespace {

// Shifts the first `skip` positional arguments off, for passing the rest on to a filter or test.
CallArgs rest_args(const CallArgs& a, size_t skip) {
  CallArgs rest;
  for (size_t n = skip; n < a.positional.size(); ++n) rest.positional.push_back(a.positional[n]);
  rest.keywords = a.keywords;
  return rest;
}

Value select_items(Renderer& r, const Value& v, CallArgs& a, bool by_attr, bool keep) {
  Value out = Value::new_iterator({});
  const size_t test_pos = by_attr ? 1 : 0;
  const Value test = a.get(test_pos, "");
  CallArgs rest = rest_args(a, test_pos + 1);
  if (!v.truthy()) return out;  // jinja2 walks the value only `if value:` (none|select is empty)
  for (const Value& item : iterate(v)) {
    r.tick();
    const Value subject = by_attr ? follow_attribute(item, a.get(0, "attribute")) : item;
    bool ok;
    if (test.is_undefined()) {
      ok = subject.truthy();
    } else {
      ok = apply_test(r, to_str(test), subject, rest);
    }
    if (ok == keep) push_item(out, item);
  }
  return out;
}

Value sorted_copy(Renderer& r, std::vector<Value> items, const Value& attribute, bool case_sensitive, bool reverse) {
  std::vector<std::pair<Value, Value>> keyed;
  keyed.reserve(items.size());
  for (Value& item : items) {
    Value k = attribute.is_undefined() || attribute.is_none() ? item : follow_attribute(item, attribute);
    keyed.emplace_back(sort_key(k, case_sensitive), std::move(item));
  }
  r.check_size(keyed.size());
  std::stable_sort(keyed.begin(), keyed.end(), [reverse](const auto& x, const auto& y) {
    return reverse ? compare_values(y.first, x.first) < 0 : compare_values(x.first, y.first) < 0;
  });
  Value out = Value::new_list();
  for (auto& kv : keyed) push_item(out, std::move(kv.second));
  return out;
}

Value extreme(Renderer& r, const Value& v, CallArgs& a, bool want_max) {
  Value sorted = sorted_copy(r, iterate(v), a.get(1, "attribute"), a.get(0, "case_sensitive").truthy(), false);
  auto& items = sorted.list->items;
  if (items.empty()) return make_undefined("No aggregated item, sequence was empty.");
  if (!want_max) return items.front();
  // The first of equal maxima, as Python's max() returns.
  const Value attr = a.get(1, "attribute");
  const bool cs = a.get(0, "case_sensitive").truthy();
  auto key = [&](const Value& x) { return sort_key(attr.is_undefined() ? x : follow_attribute(x, attr), cs); };
  size_t best = items.size() - 1;
  while (best > 0 && compare_values(key(items[best - 1]), key(items.back())) == 0) --best;
  return items[best];
}

}  // namespace

Value filter_map(Renderer& r, const Value& v, CallArgs& a) {
  Value out = Value::new_iterator({});
  if (!v.truthy()) return out;  // as select: jinja2 maps only `if value:`
  const Value attribute = a.get(SIZE_MAX, "attribute");
  if (!attribute.is_undefined()) {
    const Value def = a.get(SIZE_MAX, "default");
    for (const Value& item : iterate(v)) {
      Value x = follow_attribute(item, attribute);
      push_item(out, x.is_undefined() && !def.is_undefined() ? def : x);
    }
    return out;
  }
  const Value name = a.get(0, "");
  if (!name.is_string()) fail_render("map requires a filter name or attribute=");
  CallArgs rest = rest_args(a, 1);
  for (const Value& item : iterate(v)) {
    r.tick();
    push_item(out, apply_filter(r, name.s, item, rest));
  }
  return out;
}

Value filter_select(Renderer& r, const Value& v, CallArgs& a) { return select_items(r, v, a, false, true); }
Value filter_reject(Renderer& r, const Value& v, CallArgs& a) { return select_items(r, v, a, false, false); }
Value filter_selectattr(Renderer& r, const Value& v, CallArgs& a) { return select_items(r, v, a, true, true); }
Value filter_rejectattr(Renderer& r, const Value& v, CallArgs& a) { return select_items(r, v, a, true, false); }

Value filter_sort(Renderer& r, const Value& v, CallArgs& a) {
  return sorted_copy(r, iterate(v), a.get(2, "attribute"), a.get(1, "case_sensitive").truthy(),
                     a.get(0, "reverse").truthy());
}

Value filter_dictsort(Renderer& r, const Value& v, CallArgs& a) {
  if (!v.is_dict()) fail_render("dictsort requires a mapping");
  const bool by_value = a.get(1, "by").is_string() && a.get(1, "by").s == "value";
  std::vector<Value> pairs;
  for (const auto& [k, x] : v.dict->entries) pairs.push_back(Value::pair(k, x));
  return sorted_copy(r, std::move(pairs), Value::integer(by_value ? 1 : 0), a.get(0, "case_sensitive").truthy(),
                     a.get(2, "reverse").truthy());
}

Value filter_unique(Renderer& r, const Value& v, CallArgs& a) {
  const bool cs = a.get(0, "case_sensitive").truthy();
  const Value attr = a.get(1, "attribute");
  Value out = Value::new_iterator({});
  std::vector<Value> seen;
  for (const Value& item : iterate(v)) {
    r.tick();
    Value k = sort_key(attr.is_undefined() ? item : follow_attribute(item, attr), cs);
    if (std::any_of(seen.begin(), seen.end(), [&](const Value& s) { return values_equal(s, k); })) continue;
    seen.push_back(std::move(k));
    push_item(out, item);
  }
  return out;
}

Value filter_min(Renderer& r, const Value& v, CallArgs& a) { return extreme(r, v, a, false); }
Value filter_max(Renderer& r, const Value& v, CallArgs& a) { return extreme(r, v, a, true); }

Value filter_sum(Renderer& r, const Value& v, CallArgs& a) {
  const Value attr = a.get(0, "attribute");
  Value total = a.has(1, "start") ? a.get(1, "start") : Value::integer(0);
  for (const Value& item : iterate(v)) {
    const Value x = attr.is_undefined() ? item : follow_attribute(item, attr);
    if (!x.is_number() || !total.is_number())
      fail_render(fmt::format("unsupported operand type(s) for +: '{}' and '{}'", total.type_name(), x.type_name()));
    if (total.kind == Value::Kind::kFloat || x.kind == Value::Kind::kFloat) {
      total = Value::floating(total.as_double() + x.as_double());
    } else {
      total = Value::integer(static_cast<int64_t>(total.as_double()) + static_cast<int64_t>(x.as_double()));
    }
    r.tick();
  }
  return total;
}

Value filter_join(Renderer& r, const Value& v, CallArgs& a) {
  const Value sep = a.get(0, "d");
  const Value attr = a.get(1, "attribute");
  std::string out;
  bool first = true;
  for (const Value& item : iterate(v)) {
    if (!first) out += sep.is_undefined() ? "" : to_str(sep);
    first = false;
    out += to_str(attr.is_undefined() ? item : follow_attribute(item, attr));
    r.check_size(out.size());
  }
  return Value::string(std::move(out));
}

// Sorted by the attribute, then runs of equal keys as (grouper, items) tuples.
Value filter_groupby(Renderer& r, const Value& v, CallArgs& a) {
  r.tick();
  const Value attr = a.get(0, "attribute");
  const Value def = a.get(1, "default");
  const bool cs = a.get(2, "case_sensitive").truthy();
  auto key_of = [&](const Value& item) {
    Value k = follow_attribute(item, attr);
    return k.is_undefined() && !def.is_undefined() ? def : k;
  };
  std::vector<std::pair<Value, Value>> keyed;
  for (const Value& item : iterate(v)) keyed.emplace_back(sort_key(key_of(item), cs), item);
  std::stable_sort(keyed.begin(), keyed.end(),
                   [](const auto& x, const auto& y) { return compare_values(x.first, y.first) < 0; });
  Value out = Value::new_list();
  for (size_t n = 0; n < keyed.size();) {
    Value items = Value::new_list();
    size_t end = n;
    while (end < keyed.size() && values_equal(keyed[end].first, keyed[n].first)) push_item(items, keyed[end++].second);
    push_item(out, Value::pair(key_of(keyed[n].second), items));
    n = end;
  }
  return out;
}

Value filter_batch(Renderer& r, const Value& v, CallArgs& a) {
  // Each batch adds two levels of nesting to the items.
  r.check_nesting(v.depth() + 2);
  const Value count = a.get(0, "linecount");
  if (count.kind != Value::Kind::kInt || count.i <= 0) fail_render("batch needs a positive line count");
  const Value fill = a.get(1, "fill_with");
  Value out = Value::new_iterator({});
  Value cur = Value::new_list();
  for (const Value& item : iterate(v)) {
    push_item(cur, item);
    if (static_cast<int64_t>(cur.list->items.size()) == count.i) {
      push_item(out, cur);
      cur = Value::new_list();
    }
  }
  if (!cur.list->items.empty()) {
    while (!fill.is_undefined() && !fill.is_none() && static_cast<int64_t>(cur.list->items.size()) < count.i) {
      push_item(cur, fill);
    }
    push_item(out, cur);
  }
  for (Value& b : out.list->items) b.list->depth = v.depth() + 1;
  out.list->depth = v.depth() + 2;
  return out;
}

// Hugging Face's tojson: json.dumps(x, ensure_ascii=False, indent, separators, sort_keys).
Value filter_tojson(Renderer& r, const Value& v, CallArgs& a) {
  JsonStyle style;
  const Value indent = a.get(1, "indent");
  if (indent.kind == Value::Kind::kInt) {
    style.indent = static_cast<int>(std::clamp<int64_t>(indent.i, 0, 1 << 10));
    style.item_separator = ",";
  } else if (indent.is_string()) {
    fail_render("tojson: a string indent is not supported");
  }
  const Value seps = a.get(2, "separators");
  if (seps.is_list() && seps.list->items.size() == 2) {
    style.item_separator = to_str(seps.list->items[0]);
    style.key_separator = to_str(seps.list->items[1]);
  }
  style.sort_keys = a.get(3, "sort_keys").truthy();
  style.ensure_ascii = a.get(0, "ensure_ascii").truthy();
  std::string out;
  append_json(out, v, style);
  r.check_size(out.size());
  return Value::string(std::move(out));
}

}  // namespace tokenmill::jinja
