// A chat conversation as the APIs send it, before any chat template: the
// messages (roles system, user, assistant, tool; assistant turns may carry
// tool calls and a reasoning text, tool turns the result of one call), the
// tools offered, and the template variables the request sets. Every API
// room (OpenAI chat, llama.cpp's /apply-template, ...) fills one; the chat
// prompt (chat_prompt.h) renders it with the model's template.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "server/json_fields.h"
#include "server/tools/tool_request.h"

namespace tokenmill::server {

// One call of a prior assistant turn, as the client sends it back.
struct ToolCallRecord {
  std::string id;
  std::string name;
  std::string arguments;  // JSON text as sent (an object is accepted too and dumped)
};

struct ApiMessage {
  std::string role;                              // "system" | "user" | "assistant" | "tool"
  std::string content;                           // "" when absent or null (an assistant turn of only tool calls)
  std::string name;                              // the optional "name" field ("" when absent)
  std::vector<ToolCallRecord> tool_calls;        // assistant only
  std::string tool_call_id;                      // tool only
  std::optional<std::string> reasoning_content;  // assistant only: its think text, when the client sends it back
};

struct ChatConversation {
  std::vector<ApiMessage> messages;
  // tools, tool_choice and parallel_tool_calls as parsed.
  ToolsRequest tool_request;
  // The request's `tools` as sent (a JSON array) when they are offered to
  // the model (tools given and tool_choice not "none"); null otherwise.
  RequestJson tools = nullptr;
  // chat_template_kwargs (an object; add_generation_prompt taken out).
  RequestJson template_kwargs = RequestJson::object();
  std::optional<std::string> reasoning_effort;  // OpenAI's field, passed to templates that read it
};

// The render context Hugging Face's apply_chat_template gives a template:
// messages (tool-call arguments as JSON objects when they parse as JSON,
// as vLLM and llama.cpp pass them; a null content as ""), tools (only when offered),
// add_generation_prompt, bos_token, eos_token, reasoning_effort (when
// sent) and then every chat_template_kwargs key (which may override the
// others, as in transformers).
RequestJson chat_template_context(const ChatConversation& conversation, bool add_generation_prompt,
                                  const std::string& bos_token, const std::string& eos_token);

// The message as a template sees it (one entry of `messages`).
RequestJson message_json(const ApiMessage& message);

}  // namespace tokenmill::server
