// `tools`, `tool_choice` and `parallel_tool_calls` of a chat request ->
// ToolsRequest. Only function tools exist: {"type": "function", "function":
// {"name", "description", "parameters", "strict"}}. tool_choice: "none",
// "auto" (the default), "required", or {"type": "function", "function":
// {"name"}} naming a declared tool. The legacy `functions` /
// `function_call` stay refused (400 pointing at `tools`).
// Pure; throws ApiError 400 naming the field.
#pragma once

#include "server/json_fields.h"
#include "server/sampling_request.h"
#include "server/tools/tool_call_format.h"

namespace tokenmill::server {

inline constexpr size_t kMaxTools = 128;  // OpenAI's limit

// One entry of `tools` (only "type": "function" exists).
struct ToolDefinition {
  std::string name;         // ^[a-zA-Z0-9_-]{1,64}$, unique within the request
  std::string description;  // "" when absent
  RequestJson parameters;   // a JSON Schema object; {"type": "object", "properties": {}} when absent
  bool strict = false;      // accepted; the arguments are always constrained to `parameters`
};

enum class ToolChoiceMode { kNone, kAuto, kRequired, kNamed };

// `tools`, `tool_choice` and `parallel_tool_calls` of a chat request.
struct ToolsRequest {
  std::vector<ToolDefinition> tools;
  ToolChoiceMode mode = ToolChoiceMode::kAuto;
  std::string named;  // kNamed: a declared tool's name
  bool parallel = true;
  // The wire format the model is asked to write calls in (set with the
  // chat prompt: the template's family, or Hermes when tools reach the
  // model as text); the tool grammar and the output parser use it.
  ToolCallFormat format = ToolCallFormat::kHermes;
  // A reasoning model thinks before it calls: the grammar lets a think
  // span come first (think_first), or starts inside one the prompt opened
  // (think_open). Set with the chat prompt, as `format`.
  bool think_first = false;
  bool think_open = false;

  // Whether the output is generated and parsed as tool calls: tools were
  // declared and tool_choice is not "none".
  bool active() const { return !tools.empty() && mode != ToolChoiceMode::kNone; }
};

ToolsRequest parse_tools_request(const JsonFields& f);

}  // namespace tokenmill::server
