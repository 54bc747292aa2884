// `tools`, `tool_choice` and `parallel_tool_calls` of a chat request ->
// ToolsRequest. Only function tools exist: {"type": "function", "function":
// {"name", "description", "parameters", "strict"}}. tool_choice: "none",
// "auto" (the default), "required", or {"type": "function", "function":
// {"name"}} naming a declared tool. The legacy `functions` /
// `function_call` stay refused (400 pointing at `tools`).
// Pure; throws ApiError 400 naming the field.
#pragma once

#include "server/json_fields.h"
#include "server/openai_request.h"

namespace tokenmill::server {

inline constexpr size_t kMaxTools = 128;  // OpenAI's limit

ToolsRequest parse_tools_request(const JsonFields& f);

}  // namespace tokenmill::server
