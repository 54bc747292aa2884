#include "server/tools/tool_request.h"

#include <set>

#include "server/api_error.h"
#include "server/constraint_request.h"

namespace tokenmill::server {
namespace {

ToolDefinition parse_tool(const RequestJson& t, size_t i) {
  const std::string prefix = "tools[" + std::to_string(i) + "]";
  if (!t.is_object()) bad_request(prefix, "'{}' must be an object, got {}", prefix, describe_json(t));
  JsonFields tf(t, prefix + ".");
  tf.reject_unknown({"type", "function"});
  const std::optional<std::string> type = tf.string("type");
  if (type != "function")
    bad_request(tf.param("type"), "'{}' must be \"function\" (the only tool type), got {}", tf.param("type"),
                type ? describe_json(RequestJson(*type)) : "nothing");
  const RequestJson* fn = tf.find("function");
  if (!fn || !fn->is_object())
    bad_request(tf.param("function"), "'{}' must be an object {{\"name\", \"description\", \"parameters\"}}",
                tf.param("function"));
  JsonFields ff(*fn, tf.param("function") + ".");
  ff.reject_unknown({"name", "description", "parameters", "strict"});
  ToolDefinition d;
  const std::optional<std::string> name = ff.string("name");
  if (!name) bad_request(ff.param("name"), "'{}' is required", ff.param("name"));
  if (!is_valid_name(*name))
    bad_request(ff.param("name"), "'{}' must match ^[a-zA-Z0-9_-]{{1,64}}$, got {}", ff.param("name"),
                describe_json(RequestJson(*name)));
  d.name = *name;
  d.description = ff.string("description").value_or("");
  d.strict = ff.boolean("strict").value_or(false);
  if (const RequestJson* p = ff.find("parameters")) {
    if (!p->is_object())
      bad_request(ff.param("parameters"), "'{}' must be a JSON Schema object, got {}", ff.param("parameters"),
                  describe_json(*p));
    check_nesting(*p, ff.param("parameters"));
    d.parameters = *p;
  } else {
    d.parameters = {{"type", "object"}, {"properties", RequestJson::object()}};
  }
  return d;
}

void parse_tool_choice(const JsonFields& f, ToolsRequest& r) {
  const RequestJson* v = f.find("tool_choice");
  if (!v) return;
  if (v->is_string()) {
    const std::string& s = v->get_ref<const std::string&>();
    if (s == "none") {
      r.mode = ToolChoiceMode::kNone;
    } else if (s == "auto") {
      r.mode = ToolChoiceMode::kAuto;
    } else if (s == "required") {
      r.mode = ToolChoiceMode::kRequired;
    } else {
      bad_request("tool_choice", "'tool_choice' must be \"none\", \"auto\", \"required\" or a function, got {}",
                  describe_json(*v));
    }
  } else if (v->is_object()) {
    JsonFields cf(*v, "tool_choice.");
    cf.reject_unknown({"type", "function"});
    if (cf.string("type") != "function") bad_request("tool_choice.type", "'tool_choice.type' must be \"function\"");
    const RequestJson* fn = cf.find("function");
    const RequestJson* name = nullptr;
    if (fn && fn->is_object())
      if (auto it = fn->find("name"); it != fn->end()) name = &*it;
    if (!name || !name->is_string())
      bad_request("tool_choice.function", "'tool_choice.function' must be an object {{\"name\": ...}}");
    if (fn->size() != 1) bad_request("tool_choice.function", "'tool_choice.function' takes only 'name'");
    r.mode = ToolChoiceMode::kNamed;
    r.named = name->get<std::string>();
  } else {
    bad_request("tool_choice", "'tool_choice' must be a string or an object, got {}", describe_json(*v));
  }
  if (r.tools.empty() && (r.mode == ToolChoiceMode::kRequired || r.mode == ToolChoiceMode::kNamed))
    bad_request("tool_choice", "'tool_choice' asks for a tool call, but 'tools' declares none");
  if (r.mode == ToolChoiceMode::kNamed) {
    for (const ToolDefinition& t : r.tools)
      if (t.name == r.named) return;
    bad_request("tool_choice", "'tool_choice' names the function {}, which 'tools' does not declare",
                describe_json(RequestJson(r.named)));
  }
}

}  // namespace

ToolsRequest parse_tools_request(const JsonFields& f) {
  for (const char* name : {"functions", "function_call"}) {
    const RequestJson* v = f.find(name);
    if (v && !(v->is_array() && v->empty()) && !(v->is_string() && *v == "none"))
      bad_request(name, "'{}' (the legacy function calling API) is not supported; send 'tools'", name);
  }
  ToolsRequest r;
  if (const RequestJson* t = f.find("tools")) {
    if (!t->is_array()) bad_request("tools", "'tools' must be a list of tools, got {}", describe_json(*t));
    if (t->size() > kMaxTools)
      bad_request("tools", "'tools' holds {} tools; at most {} are allowed", t->size(), kMaxTools);
    std::set<std::string> names;
    for (size_t i = 0; i < t->size(); ++i) {
      r.tools.push_back(parse_tool((*t)[i], i));
      if (!names.insert(r.tools.back().name).second)
        bad_request("tools", "'tools' declares the function {} twice", describe_json(RequestJson(r.tools.back().name)));
    }
  }
  r.parallel = f.boolean("parallel_tool_calls").value_or(true);
  parse_tool_choice(f, r);
  return r;
}

}  // namespace tokenmill::server
