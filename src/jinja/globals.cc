// The global functions a chat template may call: jinja2's range, dict,
// namespace, cycler and joiner, and Hugging Face's raise_exception and
// strftime_now.
#include <fmt/format.h>

#include <ctime>
#include <memory>
#include <unordered_map>

#include "jinja/render.h"

namespace tokenmill::jinja {
namespace {

int64_t range_int(const Value& v) {
  if (v.kind == Value::Kind::kInt) return v.i;
  if (v.kind == Value::Kind::kBool) return v.b;
  fail_render(fmt::format("'{}' object cannot be interpreted as an integer", v.type_name()));
}

Value global_range(Renderer& r, CallArgs& args) {
  const auto& p = args.positional;
  if (p.empty() || p.size() > 3) fail_render("range expected 1 to 3 arguments");
  int64_t start = 0, stop, step = 1;
  if (p.size() == 1) {
    stop = range_int(p[0]);
  } else {
    start = range_int(p[0]);
    stop = range_int(p[1]);
    if (p.size() == 3) step = range_int(p[2]);
  }
  if (step == 0) fail_render("range() arg 3 must not be zero");
  const double count =
      std::max(0.0, std::ceil((static_cast<double>(stop) - static_cast<double>(start)) / static_cast<double>(step)));
  // Every item costs at least a step to use, so a longer range can never finish.
  if (count > static_cast<double>(r.limits().max_steps)) fail_limit("range() is longer than max_steps");
  // The items are made at once (a list, not Python's lazy range): their
  // memory counts against the bound of any container.
  r.check_bytes(static_cast<size_t>(count) * sizeof(Value));
  std::vector<Value> items;
  items.reserve(static_cast<size_t>(count));
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) items.push_back(Value::integer(i));
  return Value::new_list(std::move(items));
}

Value dict_from_args(Renderer& r, CallArgs& args, bool is_namespace) {
  Value d = Value::new_dict();
  d.dict->is_namespace = is_namespace;
  if (is_namespace) r.track_namespace(d.dict);
  for (const Value& p : args.positional) {
    if (p.is_dict()) {
      for (const auto& [k, v] : p.dict->entries) d.dict->set(k, v);
    } else if (p.is_list()) {
      for (const Value& pair : p.list->items) {
        if (!pair.is_list() || pair.list->items.size() != 2)
          fail_render("dictionary update sequence element has wrong length");
        d.dict->set(pair.list->items[0], pair.list->items[1]);
      }
    } else {
      fail_render(fmt::format("'{}' object is not iterable", p.type_name()));
    }
  }
  for (auto& [k, v] : args.keywords) d.dict->set(Value::string(k), v);
  for (const auto& kv : d.dict->entries) d.dict->depth = std::max(d.dict->depth, kv.second.depth() + 1);
  r.check_nesting(d.dict->depth);
  r.check_bytes(d.dict->bytes);
  return d;
}

Value global_strftime_now(Renderer&, CallArgs& args) {
  const Value f = args.get(0, "format");
  if (!f.is_string()) fail_render("strftime_now expects a format string");
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char buf[512];
  const size_t n = std::strftime(buf, sizeof buf, f.s.c_str(), &local);
  return Value::string(std::string(buf, n));
}

Value global_joiner(Renderer&, CallArgs& args) {
  const Value sep = args.has(0, "sep") ? args.get(0, "sep") : Value::string(", ");
  auto used = std::make_shared<bool>(false);
  return Value::function("joiner", [sep, used](Renderer&, CallArgs&) {
    if (!*used) {
      *used = true;
      return Value::string("");
    }
    return sep;
  });
}

Value global_cycler(Renderer&, CallArgs& args) {
  if (args.positional.empty()) fail_render("cycler needs at least one item");
  auto items = std::make_shared<std::vector<Value>>(args.positional);
  auto pos = std::make_shared<size_t>(0);
  Value c = Value::new_dict();
  c.dict->set(Value::string("next"), Value::function("next", [items, pos](Renderer&, CallArgs&) {
                Value v = (*items)[*pos];
                *pos = (*pos + 1) % items->size();
                return v;
              }));
  c.dict->set(Value::string("reset"), Value::function("reset", [pos](Renderer&, CallArgs&) {
                *pos = 0;
                return Value::none();
              }));
  c.dict->set(Value::string("current"), (*items)[0]);
  return c;
}

const std::unordered_map<std::string, Value>& global_table() {
  static const auto* table = new std::unordered_map<std::string, Value>{
      {"range", Value::function("range", global_range)},
      {"dict", Value::function("dict", [](Renderer& r, CallArgs& a) { return dict_from_args(r, a, false); })},
      {"namespace", Value::function("namespace", [](Renderer& r, CallArgs& a) { return dict_from_args(r, a, true); })},
      {"raise_exception", Value::function("raise_exception",
                                          [](Renderer&, CallArgs& a) -> Value {
                                            throw TemplateError(ErrorKind::kRaised, 0, 0, to_str(a.get(0, "message")));
                                          })},
      {"strftime_now", Value::function("strftime_now", global_strftime_now)},
      {"joiner", Value::function("joiner", global_joiner)},
      {"cycler", Value::function("cycler", global_cycler)},
  };
  return *table;
}

}  // namespace

Value lookup_global(const std::string& name) {
  const auto& table = global_table();
  const auto it = table.find(name);
  return it == table.end() ? Value::undefined() : it->second;
}

}  // namespace tokenmill::jinja
