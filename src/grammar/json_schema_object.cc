// Objects and arrays. Whitespace sits after every token that opens or
// separates ("{" ws, "," ws, ":" ws) and after every member, never twice in
// a row, so each text has exactly one parse.
#include <algorithm>

#include "grammar/json_schema_converter.h"
#include "grammar/regex_charset.h"
#include "util/error.h"

namespace tokenmill::grammar {

std::string repeat_text(const std::string& item, int64_t lo, int64_t hi) {
  if (hi == 0) return "";
  if (lo == 0 && hi == 1) return item + "?";
  if (lo == 0 && hi < 0) return item + "*";
  if (lo == 1 && hi < 0) return item + "+";
  if (lo == 1 && hi == 1) return item;
  if (hi < 0) return item + "{" + std::to_string(lo) + ",}";
  if (lo == hi) return item + "{" + std::to_string(lo) + "}";
  return item + "{" + std::to_string(lo) + "," + std::to_string(hi) + "}";
}

namespace {

std::string key_literal(const std::string& name) {
  try {
    return gbnf_literal_utf8(Json(name).dump());
  } catch (const nlohmann::json::exception&) {
    fail("property name is not valid UTF-8");
  }
}

struct Property {
  std::string name;
  const Json* schema;
  std::string ptr;
  bool required;
};

// What an object schema asks for, validated.
struct ObjectShape {
  std::vector<Property> props;         // declared order, then required names not declared
  std::vector<std::string> all_names;  // every declared or required name (for extras to avoid)
  const Json* extra = nullptr;         // additionalProperties as a schema with validation keywords
  bool any = false;                    // nothing declared or forbidden: any object
};

std::vector<std::string> required_names(const Json& schema, const std::string& ptr) {
  std::vector<std::string> required;
  auto r = schema.find("required");
  if (r == schema.end()) return required;
  if (!r->is_array()) fail("'required' at {} must be an array of strings", where(ptr));
  for (const Json& name : *r) {
    if (!name.is_string()) fail("'required' at {} must be an array of strings", where(ptr));
    if (std::find(required.begin(), required.end(), name.get<std::string>()) == required.end()) {
      required.push_back(name.get<std::string>());
    }
  }
  return required;
}

ObjectShape object_shape(const Json& schema, const std::string& ptr) {
  static const Json kAny = true;
  ObjectShape shape;
  auto props = schema.find("properties");
  if (props != schema.end() && !props->is_object()) fail("'properties' at {} must be an object", where(ptr));
  const std::vector<std::string> required = required_names(schema, ptr);
  // additionalProperties: false forbids extras; a schema with validation
  // keywords admits extras matching it; absent, true or {} admit any, and
  // then only declared properties are generated (a subset).
  bool extras_forbidden = false;
  if (auto ap = schema.find("additionalProperties"); ap != schema.end()) {
    if (ap->is_boolean()) {
      extras_forbidden = !ap->get<bool>();
    } else if (!ap->is_object()) {
      fail("'additionalProperties' at {} must be a boolean or a schema", where(ptr));
    } else if (!ap->empty()) {
      shape.extra = &*ap;
    }
  }
  shape.any = props == schema.end() && required.empty() && shape.extra == nullptr && !extras_forbidden;
  auto is_required = [&](const std::string& n) {
    return std::find(required.begin(), required.end(), n) != required.end();
  };
  if (props != schema.end()) {
    for (const auto& [name, sub] : props->items()) {
      shape.all_names.push_back(name);
      // An optional property whose schema is false can only be left out.
      if (!is_required(name) && sub.is_boolean() && !sub.get<bool>()) continue;
      shape.props.push_back({name, &sub, child_pointer(child_pointer(ptr, "properties"), name), is_required(name)});
    }
  }
  for (const std::string& name : required) {
    if (props != schema.end() && props->contains(name)) continue;
    if (extras_forbidden) {
      fail("required property '{}' at {} is not in 'properties' and additionalProperties is false: no object is valid",
           name, where(ptr));
    }
    shape.all_names.push_back(name);
    const Json* value = shape.extra != nullptr ? shape.extra : &kAny;
    shape.props.push_back({name, value, child_pointer(ptr, "additionalProperties"), true});
  }
  return shape;
}

// The members between "{" ws and "}". pick[i]: the next member is property
// i or a later one (never skipping a required one), or an extra once the
// declared ones are passed; next(i): what may follow a member when
// properties i.. remain. Keys differ, so every choice is decided by the key.
std::string object_members(const std::vector<Property>& props, const std::vector<std::string>& kv,
                           const std::string& extra_rule, const std::string& ws, RuleSink& sink,
                           const std::string& base) {
  const size_t n = props.size();
  if (extra_rule.empty() && std::all_of(props.begin(), props.end(), [](const Property& p) { return p.required; })) {
    std::string body;
    for (size_t i = 0; i < n; ++i) body += (i > 0 ? "\",\" " + ws + " " : "") + kv[i] + " " + ws + " ";
    return body;
  }
  std::vector<bool> required_from(n + 1, false);
  for (size_t i = n; i-- > 0;) required_from[i] = required_from[i + 1] || props[i].required;
  auto pick_exists = [&](size_t i) { return i < n || !extra_rule.empty(); };
  std::vector<std::string> pick(n + 1);
  for (size_t i = 0; i <= n; ++i) {
    if (pick_exists(i)) pick[i] = sink.fresh_name(base + "-rest");
  }
  auto next = [&](size_t i) -> std::string {
    if (i == n) return extra_rule.empty() ? "" : "(\",\" " + ws + " " + extra_rule + " " + ws + ")*";
    if (required_from[i]) return "\",\" " + ws + " " + pick[i];
    return "(\",\" " + ws + " " + pick[i] + ")?";
  };
  for (size_t i = 0; i <= n; ++i) {
    if (!pick_exists(i)) continue;
    const std::string follow = next(i == n ? n : i + 1);
    std::string body = (i == n ? extra_rule : kv[i]) + " " + ws + (follow.empty() ? "" : " " + follow);
    if (i < n && !props[i].required && pick_exists(i + 1)) body += " | " + pick[i + 1];
    sink.define(pick[i], std::move(body));
  }
  if (!pick_exists(0)) return "";
  return required_from[0] ? pick[0] + " " : pick[0] + "? ";
}

}  // namespace

std::string SchemaConverter::gen_object(const Json& schema, const std::string& ptr, int depth, std::string_view hint) {
  AtStartGuard guard(*this);
  const std::string base = hint.empty() ? "object" : std::string(hint);
  const ObjectShape shape = object_shape(schema, ptr);
  if (shape.any) return primitive("object");
  const std::string ws = primitive("ws");
  std::vector<std::string> kv;
  for (const Property& p : shape.props) {
    kv.push_back(key_literal(p.name) + " " + ws + " \":\" " + ws + " " + visit(*p.schema, p.ptr, depth + 1, p.name));
  }
  std::string extra_rule;
  if (shape.extra != nullptr) {
    LiteralTrie declared;
    for (const std::string& n : shape.all_names) {
      const std::u32string name = decode_utf8(n, "property name");
      if (std::all_of(name.begin(), name.end(), json_raw_char)) declared.insert(name);
    }
    const std::string other_keys = declared.emit_other_keys(sink_, base + "-key", deadline_);
    const std::string value =
        visit(*shape.extra, child_pointer(ptr, "additionalProperties"), depth + 1, base + "-extra");
    extra_rule = sink_.add(base + "-extra", "\"\\\"\" " + other_keys + " " + ws + " \":\" " + ws + " " + value);
  }
  const std::string members = object_members(shape.props, kv, extra_rule, ws, sink_, base);
  return sink_.add(base, "\"{\" " + ws + " " + members + "\"}\"");
}

std::string SchemaConverter::gen_array(const Json& schema, const std::string& ptr, int depth, std::string_view hint) {
  AtStartGuard guard(*this);
  const std::string base = hint.empty() ? "array" : std::string(hint);
  auto items = schema.find("items");
  if (items != schema.end() && items->is_array()) {
    fail("unsupported JSON Schema keyword 'items' at {} (the array form; use prefixItems)", where(ptr));
  }
  auto prefix = schema.find("prefixItems");
  if (prefix != schema.end() && (!prefix->is_array() || prefix->empty())) {
    fail("'prefixItems' at {} must be a non-empty array of schemas", where(ptr));
  }
  const int64_t min = std::max<int64_t>(0, count_keyword(schema, "minItems", ptr));
  int64_t max = count_keyword(schema, "maxItems", ptr);
  if (max >= 0 && min > max) fail("minItems ({}) is greater than maxItems ({}) at {}", min, max, where(ptr));
  const auto k = static_cast<int64_t>(prefix == schema.end() ? 0 : prefix->size());
  const bool items_false = items != schema.end() && items->is_boolean() && !items->get<bool>();
  if (items_false) {
    if (min > k)
      fail("minItems ({}) at {} needs more items than prefixItems allows ('items' is false)", min, where(ptr));
    max = max < 0 ? k : std::min(max, k);
  }
  const std::string ws = primitive("ws");
  if (max == 0) return sink_.add(base, "\"[\" " + ws + " \"]\"");

  const int64_t num_prefix = max < 0 ? k : std::min(k, max);
  std::vector<std::string> elems;
  for (int64_t i = 0; i < num_prefix; ++i) {
    const auto idx = static_cast<size_t>(i);
    elems.push_back(
        visit((*prefix)[idx], child_pointer(child_pointer(ptr, "prefixItems"), idx), depth + 1, base + "-item"));
  }
  std::string rest;
  if (max < 0 || max > k) {
    rest = items == schema.end() ? primitive("value")
                                 : visit(*items, child_pointer(ptr, "items"), depth + 1, base + "-item");
  }
  // After i elements: the next prefix element (required below minItems) or
  // a run of `items` elements. Long prefixes go to rules every 16 levels so
  // the nesting of parentheses stays shallow.
  const int64_t top = std::max<int64_t>(num_prefix, 1);
  std::vector<std::string> tails(static_cast<size_t>(top) + 1);
  for (int64_t i = top; i >= 1; --i) {
    std::string t;
    if (i < num_prefix) {
      const std::string& after = tails[static_cast<size_t>(i) + 1];
      const std::string piece =
          "\",\" " + ws + " " + elems[static_cast<size_t>(i)] + " " + ws + (after.empty() ? "" : " " + after);
      t = i < min ? piece : "(" + piece + ")?";
      if (i % 16 == 0) t = sink_.add(base + "-tail", t);
    } else if (!rest.empty()) {
      t = repeat_text("(\",\" " + ws + " " + rest + " " + ws + ")", std::max<int64_t>(0, min - i),
                      max < 0 ? -1 : max - i);
    }
    tails[static_cast<size_t>(i)] = t;
  }
  const std::string first = k > 0 ? elems[0] : rest;
  const std::string inner = first + " " + ws + (tails[1].empty() ? "" : " " + tails[1]);
  return sink_.add(base, "\"[\" " + ws + " " + (min >= 1 ? inner : "(" + inner + ")?") + " \"]\"");
}

}  // namespace tokenmill::grammar
