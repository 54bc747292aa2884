// The grammar of a tools.active() chat request's output: tool calls in the
// wire format `format` (tool_call_format.h; Hermes by default, the format
// of tool_prompt.h), each call's arguments constrained by its
// function's `parameters` schema (grammar::json_schema_rules):
//   tool_choice "required"  one or more calls, as the family separates them
//                           (exactly one with parallel_tool_calls false)
//   named function          exactly one call, to that function
//   "auto"                  the calls as for "required", or plain text
//                           whose first character is neither the first
//                           of the family's call opener ('<' for Hermes)
//                           nor whitespace (so text can never begin a
//                           call the grammar did not check)
// Each family's grammar writes one canonical spelling of its format
// (Llama 3: "parameters" and "; " between calls; Mistral and Granite: a
// JSON array; DeepSeek: the V3 form with a ```json fence; gpt-oss: one
// commentary message per call). kQwen3Coder's grammar is Hermes's JSON
// call inside <tool_call>, which its parser also reads: its XML
// parameters would need a schema-to-XML translation.
// ("none" has no tool grammar.) Throws tokenmill::Error naming the
// function and the schema problem, or the exceeded limit.
#pragma once

#include <string>

#include "grammar/grammar_limits.h"
#include "server/tools/tool_call_format.h"
#include "server/tools/tool_request.h"

namespace tokenmill::server {

// Precondition: tools.active().
std::string tool_call_gbnf(const ToolsRequest& tools, const grammar::GrammarLimits& limits,
                           const grammar::Deadline& deadline, ToolCallFormat format = ToolCallFormat::kHermes);

}  // namespace tokenmill::server
