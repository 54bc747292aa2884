#include "server/constraint_request.h"

#include <fmt/format.h>

#include <utility>

#include "server/api_error.h"
#include "util/bounded_json.h"
#include "util/check.h"

namespace tokenmill::server {
namespace {

using grammar::ConstraintKind;

OutputConstraint make(ConstraintKind kind, std::string text, std::string param) {
  return OutputConstraint{grammar::ConstraintSpec{kind, std::move(text)}, std::move(param)};
}

// A JSON Schema given as an object (or a boolean, which JSON Schema allows)
// or, where vLLM allows it, as JSON text. Returned as compact JSON text, so
// that equal schemas share one compiled grammar.
std::string schema_text(const RequestJson& value, const std::string& param, bool allow_text) {
  RequestJson parsed;
  const RequestJson* schema = &value;
  if (allow_text && value.is_string()) {
    try {
      // Within the body's own budget: the text is part of a body that
      // already passed it, so the default limits bound it the same way.
      parsed = util::parse_bounded<RequestJson>(value.get_ref<const std::string&>(), util::JsonLimits{});
    } catch (const util::JsonLimitError& e) {
      if (e.why() != util::JsonRefusal::kSyntax)
        bad_request(param, "'{}' is a JSON Schema as text that is too large: {}", param, e.what());
      bad_request(param, "'{}' is a string but not valid JSON (a JSON Schema as text)", param);
    }
    schema = &parsed;
  }
  if (!schema->is_object() && !schema->is_boolean())
    bad_request(param, "'{}' must be a JSON Schema (an object), got {}", param, describe_json(*schema));
  check_nesting(*schema, param);
  return schema->dump(-1, ' ', false, RequestJson::error_handler_t::replace);
}

std::string nonempty_string(const RequestJson& value, const std::string& param, const char* what) {
  if (!value.is_string()) bad_request(param, "'{}' must be a string ({}), got {}", param, what, describe_json(value));
  if (value.get_ref<const std::string&>().empty()) bad_request(param, "'{}' must not be empty", param);
  return value.get<std::string>();
}

std::string choice_text(const RequestJson& value, const std::string& param) {
  if (!value.is_array() || value.empty())
    bad_request(param, "'{}' must be a non-empty list of strings, got {}", param, describe_json(value));
  std::vector<std::string> choices;
  choices.reserve(value.size());
  for (const RequestJson& c : value) {
    if (!c.is_string()) bad_request(param, "'{}' must hold strings only, got {}", param, describe_json(c));
    choices.push_back(c.get<std::string>());
  }
  return choice_gbnf(choices);
}

std::optional<OutputConstraint> json_schema_format(const JsonFields& f) {
  if (f.has("schema"))
    bad_request("response_format.schema",
                "'response_format.schema' goes with type \"json_object\" (llama.cpp's form); with type "
                "\"json_schema\" send 'response_format.json_schema.schema'");
  const RequestJson* js = f.find("json_schema");
  if (!js || !js->is_object())
    bad_request("response_format.json_schema",
                "'response_format.json_schema' must be an object {{\"name\", \"schema\"}}, got {}",
                js ? describe_json(*js) : "nothing");
  JsonFields jf(*js, "response_format.json_schema.");
  jf.reject_unknown({"name", "description", "schema", "strict"});
  const std::optional<std::string> name = jf.string("name");
  if (!name) bad_request(jf.param("name"), "'{}' is required", jf.param("name"));
  if (!is_valid_name(*name))
    bad_request(jf.param("name"), "'{}' must match ^[a-zA-Z0-9_-]{{1,64}}$, got {}", jf.param("name"),
                describe_json(RequestJson(*name)));
  (void)jf.string("description");
  (void)jf.boolean("strict");  // always enforced: the output is constrained either way
  const RequestJson* schema = jf.find("schema");
  if (!schema) bad_request(jf.param("schema"), "'{}' is required", jf.param("schema"));
  return make(ConstraintKind::kJsonSchema, schema_text(*schema, jf.param("schema"), false), "response_format");
}

std::optional<OutputConstraint> response_format(const RequestJson& rf) {
  if (!rf.is_object())
    bad_request("response_format", "'response_format' must be an object such as {{\"type\": \"json_object\"}}, got {}",
                describe_json(rf));
  JsonFields f(rf, "response_format.");
  f.reject_unknown({"type", "json_schema", "schema"});
  const std::optional<std::string> type = f.string("type");
  if (type == "json_schema") return json_schema_format(f);
  if (type != "text" && type != "json_object")
    bad_request("response_format.type",
                "'response_format.type' must be \"text\", \"json_object\" or \"json_schema\", got {}",
                type ? describe_json(RequestJson(*type)) : "nothing");
  if (f.has("json_schema"))
    bad_request("response_format.json_schema", "'response_format.json_schema' needs type \"json_schema\"");
  if (*type == "text") {
    if (f.has("schema")) bad_request("response_format.schema", "'response_format.schema' needs type \"json_object\"");
    return std::nullopt;
  }
  if (const RequestJson* schema = f.find("schema"))
    return make(ConstraintKind::kJsonSchema, schema_text(*schema, "response_format.schema", false), "response_format");
  return make(ConstraintKind::kJsonObject, "", "response_format");
}

// vLLM's structured_outputs: exactly one of its members.
std::optional<OutputConstraint> structured_outputs(const RequestJson& v) {
  const std::string param = "structured_outputs";
  if (!v.is_object()) bad_request(param, "'structured_outputs' must be an object, got {}", describe_json(v));
  JsonFields f(v, "structured_outputs.");
  f.reject_unknown({"json", "regex", "grammar", "choice", "json_object"});
  std::optional<OutputConstraint> out;
  std::string first;
  auto take = [&](const char* member, OutputConstraint c) {
    if (out)
      bad_request(f.param(member), "'{}' and '{}' both constrain the output; send only one", f.param(first),
                  f.param(member));
    out = std::move(c);
    first = member;
  };
  if (const RequestJson* j = f.find("json"))
    take("json", make(ConstraintKind::kJsonSchema, schema_text(*j, f.param("json"), true), param));
  if (const RequestJson* r = f.find("regex"))
    take("regex", make(ConstraintKind::kRegex, nonempty_string(*r, f.param("regex"), "a regular expression"), param));
  if (const RequestJson* g = f.find("grammar"))
    take("grammar", make(ConstraintKind::kGbnf, nonempty_string(*g, f.param("grammar"), "a GBNF grammar"), param));
  if (const RequestJson* c = f.find("choice"))
    take("choice", make(ConstraintKind::kGbnf, choice_text(*c, f.param("choice")), param));
  if (f.boolean("json_object").value_or(false)) take("json_object", make(ConstraintKind::kJsonObject, "", param));
  return out;
}

// One top-level field -> its constraint (nullopt: it asks for none).
std::optional<OutputConstraint> field_constraint(const std::string& name, const RequestJson& v) {
  if (name == "response_format") return response_format(v);
  if (name == "structured_outputs") return structured_outputs(v);
  if (name == "guided_json" || name == "json_schema")
    return make(ConstraintKind::kJsonSchema, schema_text(v, name, name == "guided_json"), name);
  if (name == "guided_regex")
    return make(ConstraintKind::kRegex, nonempty_string(v, name, "a regular expression"), name);
  if (name == "guided_grammar") return make(ConstraintKind::kGbnf, nonempty_string(v, name, "a GBNF grammar"), name);
  if (name == "guided_choice") return make(ConstraintKind::kGbnf, choice_text(v, name), name);
  TM_CHECK(name == "grammar");  // the last of constraint_fields()
  // llama.cpp's `grammar`: its server treats "" as no grammar.
  if (v.is_string() && v.get_ref<const std::string&>().empty()) return std::nullopt;
  return make(ConstraintKind::kGbnf, nonempty_string(v, name, "a GBNF grammar"), name);
}

}  // namespace

const std::set<std::string, std::less<>>& constraint_fields() {
  static const std::set<std::string, std::less<>> k = {"response_format", "guided_json",   "guided_regex",
                                                       "guided_grammar",  "guided_choice", "structured_outputs",
                                                       "grammar",         "json_schema"};
  return k;
}

std::optional<OutputConstraint> parse_output_constraint(const JsonFields& f) {
  // A fixed order, so that the error for two constraints is deterministic.
  static const char* const kOrder[] = {"response_format", "guided_json",        "guided_regex", "guided_grammar",
                                       "guided_choice",   "structured_outputs", "grammar",      "json_schema"};
  std::optional<OutputConstraint> out;
  for (const char* name : kOrder) {
    const RequestJson* v = f.find(name);
    if (!v) continue;
    std::optional<OutputConstraint> c = field_constraint(name, *v);
    if (!c) continue;
    if (out) bad_request(name, "'{}' and '{}' both constrain the output; send only one", out->param, name);
    out = std::move(c);
  }
  return out;
}

std::string gbnf_literal(std::string_view s) {
  std::string out = "\"";
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20 || c == 0x7f) {
          out += fmt::format("\\x{:02X}", c);
        } else {
          out += ch;
        }
    }
  }
  out += '"';
  return out;
}

std::string choice_gbnf(const std::vector<std::string>& choices) {
  std::string out = "root ::= ";
  for (size_t i = 0; i < choices.size(); ++i) {
    if (i > 0) out += " | ";
    out += gbnf_literal(choices[i]);
  }
  out += '\n';
  return out;
}

void check_nesting(const RequestJson& value, const std::string& param) {
  std::vector<std::pair<const RequestJson*, int>> stack = {{&value, 1}};
  while (!stack.empty()) {
    const auto [v, depth] = stack.back();
    stack.pop_back();
    if (!v->is_structured()) continue;
    if (depth > kMaxConstraintNesting)
      bad_request(param, "'{}' nests JSON deeper than {} levels", param, kMaxConstraintNesting);
    for (const RequestJson& child : *v) stack.emplace_back(&child, depth + 1);
  }
}

bool is_valid_name(std::string_view name) {
  if (name.empty() || name.size() > 64) return false;
  for (const char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

}  // namespace tokenmill::server
