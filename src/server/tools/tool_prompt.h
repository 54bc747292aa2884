// Tool use as plain text, so that it works with every built-in chat
// template (none of which knows about tools):
//  - the declared tools become a system-message text that lists each
//    function as one JSON object per line and explains the call format
//    (appended to the conversation's first system message, or a new one);
//  - a prior assistant turn's tool_calls become text in that turn, in the
//    format the model is asked to produce (the Hermes / Qwen style):
//      <tool_call>
//      {"name": "NAME", "arguments": {...}}
//      </tool_call>
//  - tool results become a user turn of <tool_response>...</tool_response>
//    blocks; consecutive results (and a user message right after them)
//    merge into one turn, so templates that need user/assistant
//    alternation (Gemma, Llama 2, Mistral) accept the conversation.
// Pure functions.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "server/chat_conversation.h"
#include "server/tools/tool_request.h"
#include "tokenizer/chat_template.h"

namespace tokenmill::server {

inline constexpr std::string_view kToolCallOpen = "<tool_call>";
inline constexpr std::string_view kToolCallClose = "</tool_call>";

// One call in the wire format above. `arguments` is inserted as it is
// when it is JSON, else as a JSON string.
std::string tool_call_text(const std::string& name, const std::string& arguments);

// The system-message text for tools.active() requests.
std::string tools_system_text(const ToolsRequest& tools);

// The turns the chat template renders (roles system, user, assistant).
// Tool definitions are rendered only when tools.active().
std::vector<tokenizer::ChatMessage> template_messages(const std::vector<ApiMessage>& messages,
                                                      const ToolsRequest& tools);

}  // namespace tokenmill::server
