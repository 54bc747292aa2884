#include "server/chat_conversation.h"

namespace tokenmill::server {

namespace {

// Templates write arguments with `| tojson` (Llama 3.1, Qwen, Hermes) or
// iterate over them (Qwen3-Coder): they expect the object, not its JSON
// text. Text that is not a JSON object stays a string.
RequestJson arguments_json(const std::string& arguments) {
  RequestJson parsed = RequestJson::parse(arguments, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_object()) return parsed;
  return arguments;
}

RequestJson tool_call_json(const ToolCallRecord& call) {
  RequestJson c = RequestJson::object();
  if (!call.id.empty()) c["id"] = call.id;
  c["type"] = "function";
  c["function"] = {{"name", call.name}, {"arguments", arguments_json(call.arguments)}};
  return c;
}

}  // namespace

RequestJson message_json(const ApiMessage& message) {
  RequestJson m = RequestJson::object();
  m["role"] = message.role;
  // An absent content (an assistant turn of only tool calls) is passed as
  // "", not None: templates such as Qwen3's test `'</think>' in content`,
  // which raises on None in jinja2.
  m["content"] = message.content;
  if (!message.name.empty()) m["name"] = message.name;
  if (!message.tool_calls.empty()) {
    RequestJson calls = RequestJson::array();
    for (const ToolCallRecord& c : message.tool_calls) calls.push_back(tool_call_json(c));
    m["tool_calls"] = std::move(calls);
  }
  if (!message.tool_call_id.empty()) m["tool_call_id"] = message.tool_call_id;
  if (message.reasoning_content) m["reasoning_content"] = *message.reasoning_content;
  return m;
}

RequestJson chat_template_context(const ChatConversation& conversation, bool add_generation_prompt,
                                  const std::string& bos_token, const std::string& eos_token) {
  RequestJson ctx = RequestJson::object();
  RequestJson messages = RequestJson::array();
  for (const ApiMessage& m : conversation.messages) messages.push_back(message_json(m));
  ctx["messages"] = std::move(messages);
  if (!conversation.tools.is_null()) ctx["tools"] = conversation.tools;
  ctx["add_generation_prompt"] = add_generation_prompt;
  ctx["bos_token"] = bos_token;
  ctx["eos_token"] = eos_token;
  if (conversation.reasoning_effort) ctx["reasoning_effort"] = *conversation.reasoning_effort;
  for (auto it = conversation.template_kwargs.begin(); it != conversation.template_kwargs.end(); ++it)
    ctx[it.key()] = it.value();
  return ctx;
}

}  // namespace tokenmill::server
