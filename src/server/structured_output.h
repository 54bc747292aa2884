// Structured output on the handler side: a request's output constraint or
// tool calls -> the grammar the engine masks sampling with, compiled in the
// HTTP worker's thread (never on the engine thread) by the server's
// GrammarCompiler, which caches grammars by their text.
#pragma once

#include <memory>
#include <optional>

#include "grammar/compiled_grammar.h"
#include "server/openai/openai_response.h"
#include "server/serving_context.h"
#include "server/tools/tool_call_format.h"
#include "server/tools/tool_request.h"

namespace tokenmill::server {

// nullptr when the request asks for neither a constraint nor tool calls
// (tools may be null: /v1/completions has none). Fails closed: whatever the
// compiler refuses (an unsupported JSON Schema keyword, a regex construct,
// a GBNF syntax error, a limit) is ApiError 400 whose param is the field
// ("response_format", "guided_json", ..., or "tools") and whose message is
// the compiler's; so is a model without a tokenizer.
std::shared_ptr<const grammar::CompiledGrammar> request_grammar(ServingContext& ctx,
                                                                const std::optional<OutputConstraint>& constraint,
                                                                const ToolsRequest* tools,
                                                                ToolCallFormat format = ToolCallFormat::kHermes);

// A finished chat choice of a tools request: parses its text into
// tool_calls (fresh "call_..." ids), content (null when only calls), and
// finish_reason "tool_calls" when it stopped normally after a call.
// `format`: the model's wire format (tool_call_format.h), as for the
// grammar. Reasoning the format reports (gpt-oss's analysis channel) is
// appended to choice.reasoning.
void apply_tool_calls(ChoiceOutput& choice, ToolCallFormat format = ToolCallFormat::kHermes);

}  // namespace tokenmill::server
