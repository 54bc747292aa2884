#include "server/openai/chat_messages.h"

#include "server/api_error.h"
#include "server/constraint_request.h"

namespace tokenmill::server {
namespace {

std::string message_content(const RequestJson& content, const std::string& param) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array())
    bad_request(param, "'{}' must be a string or a list of text parts, got {}", param, describe_json(content));
  std::string text;
  for (const RequestJson& part : content) {
    if (!part.is_object() || part.value("type", RequestJson()) != "text" || !part.contains("text") ||
        !part["text"].is_string())
      bad_request(param, "'{}' parts must be {{\"type\": \"text\", \"text\": ...}}; only text is supported, got {}",
                  param, describe_json(part));
    text += part["text"].get<std::string>();
  }
  return text;
}

ToolCallRecord parse_tool_call(const RequestJson& c, const std::string& prefix) {
  if (!c.is_object()) bad_request(prefix, "'{}' must be an object, got {}", prefix, describe_json(c));
  JsonFields cf(c, prefix + ".");
  cf.reject_unknown({"id", "type", "function", "index"});
  if (cf.string("type").value_or("function") != "function")
    bad_request(cf.param("type"), "'{}' must be \"function\"", cf.param("type"));
  ToolCallRecord r;
  r.id = cf.string("id").value_or("");
  const RequestJson* fn = cf.find("function");
  if (!fn || !fn->is_object())
    bad_request(cf.param("function"), "'{}' must be an object {{\"name\", \"arguments\"}}", cf.param("function"));
  JsonFields ff(*fn, cf.param("function") + ".");
  ff.reject_unknown({"name", "arguments"});
  const std::optional<std::string> name = ff.string("name");
  if (!name || name->empty()) bad_request(ff.param("name"), "'{}' is required", ff.param("name"));
  r.name = *name;
  const RequestJson* args = ff.find("arguments");
  if (!args) {
    r.arguments = "{}";
  } else if (args->is_string()) {
    r.arguments = args->get<std::string>();
  } else if (args->is_object()) {
    check_nesting(*args, ff.param("arguments"));  // dump() recurses
    r.arguments = args->dump(-1, ' ', false, RequestJson::error_handler_t::replace);
  } else {
    bad_request(ff.param("arguments"), "'{}' must be a string of JSON, got {}", ff.param("arguments"),
                describe_json(*args));
  }
  return r;
}

std::vector<ToolCallRecord> parse_tool_calls(const JsonFields& mf) {
  const RequestJson* v = mf.find("tool_calls");
  if (!v) return {};
  if (!v->is_array())
    bad_request(mf.param("tool_calls"), "'{}' must be a list, got {}", mf.param("tool_calls"), describe_json(*v));
  std::vector<ToolCallRecord> out;
  for (size_t i = 0; i < v->size(); ++i)
    out.push_back(parse_tool_call((*v)[i], mf.param("tool_calls") + "[" + std::to_string(i) + "]"));
  return out;
}

// Null (absent) is fine; annotations (citations of an earlier reply) do not
// change the prompt and are dropped. Audio turns and the deprecated
// function_call format have no rendering here.
void reject_unsupported_history_fields(const JsonFields& mf) {
  if (mf.has("audio")) bad_request(mf.param("audio"), "'{}' is not supported (text only)", mf.param("audio"));
  if (mf.has("function_call"))
    bad_request(mf.param("function_call"), "'{}' (deprecated function calling) is not supported; send 'tool_calls'",
                mf.param("function_call"));
}

ApiMessage parse_message(const RequestJson& m, size_t i, const ApiMessage* previous) {
  if (!m.is_object()) bad_request("messages", "'messages[{}]' must be an object, got {}", i, describe_json(m));
  JsonFields mf(m, "messages[" + std::to_string(i) + "].");
  // "refusal" comes back when a client appends the response's message, and
  // "annotations", "audio" and "function_call" too when it appends the
  // openai client's message.model_dump() (as nulls).
  mf.reject_unknown({"role", "content", "name", "tool_calls", "tool_call_id", "refusal", "annotations", "audio",
                     "function_call", "reasoning_content"});
  reject_unsupported_history_fields(mf);
  ApiMessage out;
  out.role = mf.string("role").value_or("");
  if (out.role == "developer") out.role = "system";
  if (out.role != "system" && out.role != "user" && out.role != "assistant" && out.role != "tool")
    bad_request(mf.param("role"), "'{}' must be \"system\", \"user\", \"assistant\" or \"tool\", got {}",
                mf.param("role"), m.contains("role") ? describe_json(m["role"]) : "nothing");
  if (out.role == "assistant") {
    out.tool_calls = parse_tool_calls(mf);
  } else if (mf.has("tool_calls")) {
    bad_request(mf.param("tool_calls"), "'{}' is only allowed on assistant messages", mf.param("tool_calls"));
  }
  if (out.role == "tool") {
    const std::optional<std::string> id = mf.string("tool_call_id");
    if (!id) bad_request(mf.param("tool_call_id"), "'{}' is required on tool messages", mf.param("tool_call_id"));
    out.tool_call_id = *id;
    if (!previous || !(previous->role == "tool" || !previous->tool_calls.empty()))
      bad_request(mf.param("role"), "a tool message must follow an assistant message with 'tool_calls'");
  } else if (mf.has("tool_call_id")) {
    bad_request(mf.param("tool_call_id"), "'{}' is only allowed on tool messages", mf.param("tool_call_id"));
  }
  const RequestJson* content = mf.find("content");
  if (content) {
    out.content = message_content(*content, mf.param("content"));
  } else if (out.tool_calls.empty()) {
    bad_request(mf.param("content"), "'{}' is required", mf.param("content"));
  }
  out.name = mf.string("name").value_or("");
  if (const std::optional<std::string> r = mf.string("reasoning_content")) {
    if (out.role != "assistant")
      bad_request(mf.param("reasoning_content"), "'{}' is only allowed on assistant messages",
                  mf.param("reasoning_content"));
    out.reasoning_content = *r;
  }
  return out;
}

}  // namespace

std::vector<ApiMessage> parse_api_messages(const JsonFields& f) {
  const RequestJson* v = f.find("messages");
  if (!v) bad_request("messages", "'messages' is required");
  if (!v->is_array() || v->empty())
    bad_request("messages", "'messages' must be a non-empty list of messages, got {}", describe_json(*v));
  std::vector<ApiMessage> out;
  out.reserve(v->size());
  for (size_t i = 0; i < v->size(); ++i) out.push_back(parse_message((*v)[i], i, out.empty() ? nullptr : &out.back()));
  return out;
}

}  // namespace tokenmill::server
