// The grammar of a tools.active() chat request's output: tool calls in the
// wire format of tool_prompt.h, each call's arguments constrained by its
// function's `parameters` schema (grammar::json_schema_rules):
//   tool_choice "required"  one or more calls separated by "\n" (exactly
//                           one with parallel_tool_calls false)
//   named function          exactly one call, to that function
//   "auto"                  the calls as for "required", or plain text
//                           whose first character is neither '<' nor
//                           whitespace (so text can never begin a call
//                           the grammar did not check)
// ("none" has no tool grammar.) Throws tokenmill::Error naming the
// function and the schema problem, or the exceeded limit.
#pragma once

#include <string>

#include "grammar/grammar_limits.h"
#include "server/tools/tool_request.h"

namespace tokenmill::server {

// Precondition: tools.active().
std::string tool_call_gbnf(const ToolsRequest& tools, const grammar::GrammarLimits& limits,
                           const grammar::Deadline& deadline);

}  // namespace tokenmill::server
