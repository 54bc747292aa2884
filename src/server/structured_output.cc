#include "server/structured_output.h"

#include "grammar/grammar_compiler.h"
#include "server/api_error.h"
#include "server/tools/tool_grammar.h"
#include "util/error.h"

namespace tokenmill::server {

std::shared_ptr<const grammar::CompiledGrammar> request_grammar(ServingContext& ctx,
                                                                const std::optional<OutputConstraint>& constraint,
                                                                const ToolsRequest* tools, ToolCallFormat format) {
  const bool use_tools = tools && tools->active();
  if (!use_tools && !constraint) return nullptr;
  const std::string param = use_tools ? std::string("tools") : constraint->param;
  if (!ctx.grammar_compiler)
    bad_request(param, "'{}' constrains the output, which needs the model's tokenizer; this model has none", param);
  try {
    if (!use_tools) return ctx.grammar_compiler->compile(constraint->spec);
    const grammar::GrammarLimits& limits = ctx.grammar_compiler->limits();
    const grammar::Deadline deadline(limits.max_compile_time);
    return ctx.grammar_compiler->compile(
        {grammar::ConstraintKind::kGbnf, tool_call_gbnf(*tools, limits, deadline, format)});
  } catch (const Error& e) {
    bad_request(param, "{}", e.what());
  }
}

void apply_tool_calls(ChoiceOutput& choice, ToolCallFormat format) {
  ParsedChoice parsed = parse_tool_calls(choice.text, format);
  choice.text = std::move(parsed.content);
  choice.reasoning += parsed.reasoning;
  if (parsed.calls.empty()) return;
  std::vector<std::string> ids;
  for (size_t i = 0; i < parsed.calls.size(); ++i) ids.push_back(new_response_id("call_"));
  choice.tool_calls = tool_calls_json(parsed.calls, ids);
  choice.null_content = choice.text.empty();
  if (choice.finish_reason == "stop") choice.finish_reason = "tool_calls";
}

}  // namespace tokenmill::server
