// The `messages` of a chat request as the API sends them, before the chat
// template: roles system (developer), user, assistant and tool; assistant
// messages may carry `tool_calls` (their content then may be null), tool
// messages carry the result of one call (`tool_call_id`); an assistant
// message may carry its `reasoning_content`. Content is a string or a list
// of text parts (joined). tool_prompt.h turns these into the
// system/user/assistant turns every built-in template renders.
// Pure; throws ApiError 400 naming the field (messages[2].tool_call_id ...).
#pragma once

#include <string>
#include <vector>

#include "server/chat_conversation.h"
#include "server/json_fields.h"

namespace tokenmill::server {

// Reads f's "messages": a non-empty list. A tool message must follow an
// assistant message with tool_calls (or another tool message).
std::vector<ApiMessage> parse_api_messages(const JsonFields& f);

}  // namespace tokenmill::server
