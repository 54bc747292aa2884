// allOf, anyOf, oneOf and $ref with sibling keywords. All of them reduce to
// merging schema objects: a value valid under allOf [A, B] is valid under
// the union of A's and B's keywords exactly when no keyword appears in both
// with different values and no keyword of one part reads another keyword of
// the other (additionalProperties reads properties, items reads
// prefixItems). Anything else is refused rather than approximated.
#include <algorithm>
#include <optional>

#include "grammar/json_schema_converter.h"
#include "util/error.h"

namespace tokenmill::grammar {
namespace {

constexpr int kMaxProofDepth = 16;

bool only_ref(const Json& schema) {
  if (!schema.is_object() || !schema.contains("$ref")) return false;
  for (const auto& [key, unused] : schema.items()) {
    if (key != "$ref" && !is_annotation(key) && !is_container(key)) return false;
  }
  return true;
}

bool has_validation_keys(const Json& schema) {
  for (const auto& [key, unused] : schema.items()) {
    if (!is_annotation(key) && !is_container(key)) return true;
  }
  return false;
}

std::vector<std::string> type_list(const Json& t) {
  std::vector<std::string> out;
  if (t.is_string()) out.push_back(t.get<std::string>());
  if (t.is_array()) {
    for (const Json& x : t) {
      if (x.is_string()) out.push_back(x.get<std::string>());
    }
  }
  return out;
}

// The types both `type` values allow; integer is the meet of integer and
// number.
Json intersect_types(const Json& a, const Json& b, const std::string& ptr) {
  Json out = Json::array();
  for (const std::string& x : type_list(a)) {
    for (const std::string& y : type_list(b)) {
      std::string meet;
      if (x == y) {
        meet = x;
      } else if ((x == "integer" && y == "number") || (x == "number" && y == "integer")) {
        meet = "integer";
      }
      if (!meet.empty() && std::find(out.begin(), out.end(), Json(meet)) == out.end()) out.push_back(meet);
    }
  }
  if (out.empty()) fail("allOf at {}: the parts' types have nothing in common, so no value is valid", where(ptr));
  return out;
}

unsigned type_bits(const std::string& name) {
  if (name == "null") return kTypeNull;
  if (name == "boolean") return kTypeBoolean;
  if (name == "object") return kTypeObject;
  if (name == "array") return kTypeArray;
  if (name == "string") return kTypeString;
  if (name == "number" || name == "integer") return kTypeNumber;
  return kTypeAll;
}

unsigned value_type(const Json& v) {
  if (v.is_null()) return kTypeNull;
  if (v.is_boolean()) return kTypeBoolean;
  if (v.is_object()) return kTypeObject;
  if (v.is_array()) return kTypeArray;
  if (v.is_string()) return kTypeString;
  return kTypeNumber;
}

// The values an enum/const allows, when the schema has either.
std::optional<std::vector<Json>> literal_values(const Json& s) {
  if (!s.is_object()) return std::nullopt;
  std::optional<std::vector<Json>> out;
  if (auto e = s.find("enum"); e != s.end() && e->is_array()) out = std::vector<Json>(e->begin(), e->end());
  if (auto c = s.find("const"); c != s.end()) {
    if (out) {
      std::erase_if(*out, [&](const Json& v) { return !json_equal(v, *c); });
    } else {
      out = std::vector<Json>{*c};
    }
  }
  return out;
}

}  // namespace

Json SchemaConverter::merge_parts(const std::vector<const Json*>& parts, const std::string& ptr, int depth) const {
  Json merged = Json::object();
  std::map<std::string, size_t> origin;
  for (size_t i = 0; i < parts.size(); ++i) {
    const Json* part = parts[i];
    for (int hops = 0; only_ref(*part); ++hops) {
      if (hops + depth > limits_.max_schema_depth) {
        fail("JSON Schema $ref chain at {} exceeds max_schema_depth ({})", where(ptr), limits_.max_schema_depth);
      }
      const Json& ref = (*part)["$ref"];
      part = &resolve(ref_pointer(ref, ptr), ref.get<std::string>(), ptr);
    }
    if (part->is_boolean()) {
      if (part->get<bool>()) continue;
      fail("the schema at {} combines a false schema: no value is valid there", where(ptr));
    }
    if (!part->is_object()) fail("the schemas combined at {} must be objects or booleans", where(ptr));
    for (const auto& [key, value] : part->items()) {
      if (is_annotation(key) || is_container(key)) continue;
      auto existing = merged.find(key);
      if (existing == merged.end()) {
        merged[key] = value;
        origin[key] = i;
      } else if (key == "type") {
        *existing = intersect_types(*existing, value, ptr);
      } else if (!json_equal(*existing, value)) {
        fail("allOf at {}: keyword '{}' appears in more than one combined schema with different values; not supported",
             where(ptr), key);
      }
    }
  }
  for (const auto& [a, b] : {std::pair{"properties", "additionalProperties"}, std::pair{"prefixItems", "items"}}) {
    if (origin.count(a) && origin.count(b) && origin[a] != origin[b]) {
      fail("allOf at {}: '{}' and '{}' come from different combined schemas; not supported", where(ptr), a, b);
    }
  }
  return merged;
}

std::string SchemaConverter::gen_all_of(const Json& schema, const std::string& ptr, int depth, std::string_view hint) {
  const Json& all = schema["allOf"];
  if (!all.is_array() || all.empty()) fail("'allOf' at {} must be a non-empty array of schemas", where(ptr));
  Json rest = schema;
  rest.erase("allOf");
  std::vector<const Json*> parts{&rest};
  for (const Json& part : all) parts.push_back(&part);
  const Json merged = merge_parts(parts, ptr, depth);
  return visit(merged, ptr, depth + 1, hint);
}

std::string SchemaConverter::gen_ref_with_siblings(const Json& schema, const std::string& ptr, int depth,
                                                   std::string_view hint) {
  if (only_ref(schema)) return ref_rule(schema["$ref"], ptr, depth);
  // 2020-12: $ref applies alongside its siblings, as allOf would.
  Json rest = schema;
  rest.erase("$ref");
  const Json& ref = schema["$ref"];
  const Json& target = resolve(ref_pointer(ref, ptr), ref.get<std::string>(), ptr);
  const Json merged = merge_parts({&rest, &target}, ptr, depth);
  return visit(merged, ptr, depth + 1, hint);
}

std::string SchemaConverter::gen_any_of(const Json& schema, const std::string& ptr, int depth, std::string_view hint) {
  if (schema.contains("anyOf") && schema.contains("oneOf")) {
    fail("'anyOf' together with 'oneOf' at {} is not supported", where(ptr));
  }
  const char* key = schema.contains("anyOf") ? "anyOf" : "oneOf";
  const Json& branches = schema[key];
  if (!branches.is_array() || branches.empty())
    fail("'{}' at {} must be a non-empty array of schemas", key, where(ptr));
  Json rest = schema;
  rest.erase(key);
  const bool siblings = has_validation_keys(rest);
  // Sibling keywords apply to every branch: (S and (A or B)) = (S and A) or (S and B).
  std::vector<Json> merged;
  for (const Json& b : branches) {
    if (b.is_boolean() && !b.get<bool>()) continue;  // a false branch matches nothing
    merged.push_back(siblings ? merge_parts({&rest, &b}, ptr, depth) : b);
  }
  if (merged.empty()) fail("every branch of '{}' at {} is false: no value is valid", key, where(ptr));
  if (std::string_view(key) == "oneOf") {
    for (size_t i = 0; i < merged.size(); ++i) {
      for (size_t j = i + 1; j < merged.size(); ++j) {
        if (!disjoint(merged[i], merged[j], 0)) {
          fail("oneOf with overlapping branches is not supported; use anyOf (at {}: branches {} and {} may both match)",
               where(ptr), i, j);
        }
      }
    }
  }
  std::vector<std::string> alts;
  const std::string branches_ptr = child_pointer(ptr, key);
  for (size_t i = 0; i < merged.size(); ++i) {
    std::string alt = visit(merged[i], child_pointer(branches_ptr, i), depth + 1, hint);
    if (std::find(alts.begin(), alts.end(), alt) == alts.end()) alts.push_back(std::move(alt));
  }
  if (alts.size() == 1) return alts[0];
  std::string out = "(";
  for (size_t i = 0; i < alts.size(); ++i) out += (i > 0 ? " | " : "") + alts[i];
  return out + ")";
}

const Json& SchemaConverter::deref(const Json& schema, int depth) const {
  const Json* s = &schema;
  for (int hops = 0; only_ref(*s) && hops < kMaxProofDepth + depth; ++hops) {
    const Json& ref = (*s)["$ref"];
    try {
      s = &resolve(ref_pointer(ref, ""), ref.get<std::string>(), "");
    } catch (const Error&) {
      return *s;
    }
  }
  return *s;
}

// The types a schema lets through under JSON Schema's own semantics (not
// the converter's subset): without `type`, every type is valid.
unsigned SchemaConverter::types_of(const Json& schema, int depth) const {
  deadline_.check("JSON Schema oneOf");  // wide anyOf trees under $ref can branch a lot
  if (depth > kMaxProofDepth) return kTypeAll;
  if (schema.is_boolean()) return schema.get<bool>() ? unsigned{kTypeAll} : 0u;
  if (!schema.is_object()) return kTypeAll;
  unsigned t = kTypeAll;
  if (auto it = schema.find("type"); it != schema.end()) {
    unsigned m = 0;
    for (const std::string& name : type_list(*it)) m |= type_bits(name);
    t &= m;
  }
  if (auto values = literal_values(schema)) {
    unsigned m = 0;
    for (const Json& v : *values) m |= value_type(v);
    t &= m;
  }
  if (auto ref = schema.find("$ref"); ref != schema.end() && ref->is_string()) {
    try {
      t &= types_of(resolve(ref_pointer(*ref, ""), ref->get<std::string>(), ""), depth + 1);
    } catch (const Error&) {
      // An unresolvable $ref fails the conversion elsewhere; here it proves nothing.
    }
  }
  if (auto all = schema.find("allOf"); all != schema.end() && all->is_array()) {
    for (const Json& p : *all) t &= types_of(p, depth + 1);
  }
  for (const char* key : {"anyOf", "oneOf"}) {
    if (auto any = schema.find(key); any != schema.end() && any->is_array()) {
      unsigned m = 0;
      for (const Json& b : *any) m |= types_of(b, depth + 1);
      t &= m;
    }
  }
  return t;
}

// True only when no value can be valid under both schemas: their types do
// not meet, their enum/const values differ, or (objects only) some property
// both require has disjoint schemas (a discriminator such as "kind").
bool SchemaConverter::disjoint(const Json& a, const Json& b, int depth) const {
  deadline_.check("JSON Schema oneOf");
  if (depth > kMaxProofDepth) return false;
  const Json& x = deref(a, depth);
  const Json& y = deref(b, depth);
  const unsigned common = types_of(x, depth) & types_of(y, depth);
  if (common == 0) return true;
  auto vx = literal_values(x), vy = literal_values(y);
  if (vx && vy) {
    for (const Json& v : *vx) {
      deadline_.check("JSON Schema oneOf");
      for (const Json& w : *vy) {
        if (json_equal(v, w)) return false;
      }
    }
    return true;
  }
  if (common != kTypeObject || !x.is_object() || !y.is_object()) return false;
  auto rx = x.find("required"), ry = y.find("required");
  auto px = x.find("properties"), py = y.find("properties");
  if (rx == x.end() || ry == y.end() || px == x.end() || py == y.end()) return false;
  if (!rx->is_array() || !ry->is_array() || !px->is_object() || !py->is_object()) return false;
  for (const Json& name : *rx) {
    if (!name.is_string() || std::find(ry->begin(), ry->end(), name) == ry->end()) continue;
    const auto key = name.get<std::string>();
    if (px->contains(key) && py->contains(key) && disjoint((*px)[key], (*py)[key], depth + 1)) return true;
  }
  return false;
}

}  // namespace tokenmill::grammar
