#include "server/structured_output.h"

#include "grammar/grammar_compiler.h"
#include "server/api_error.h"
#include "server/tools/tool_grammar.h"
#include "util/check.h"
#include "util/error.h"

namespace tokenmill::server {

namespace {

// The tool grammar behind a think span: `<think>` (unless the prompt
// opened it), text, `</think>`, whitespace. The span's text may hold '<'
// but not "</" (GBNF has no "anything but this string"), so its first "</"
// must be the closing tag.
std::string behind_think_span(std::string gbnf, bool think_open) {
  TM_CHECK(gbnf.rfind("root ::= ", 0) == 0);
  gbnf.replace(0, 4, "tools-root");
  const std::string span = R"(think-body "</think>" [ \t\r\n]*)";
  std::string head =
      think_open ? "root ::= " + span + " tools-root\n" : "root ::= (\"<think>\" " + span + ")? tools-root\n";
  head += "think-body ::= ([^<] | \"<\" [^/])*\n";
  return head + gbnf;
}

}  // namespace

std::string tools_gbnf(const ToolsRequest& tools, const grammar::GrammarLimits& limits) {
  const grammar::Deadline deadline(limits.max_compile_time);
  std::string gbnf = tool_call_gbnf(tools, limits, deadline, tools.format);
  return tools.think_first ? behind_think_span(std::move(gbnf), tools.think_open) : gbnf;
}

std::shared_ptr<const grammar::CompiledGrammar> request_grammar(ServingContext& ctx,
                                                                const std::optional<OutputConstraint>& constraint,
                                                                const ToolsRequest* tools) {
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
        {grammar::ConstraintKind::kGbnf, tool_call_gbnf(*tools, limits, deadline, tools->format)});
  } catch (const Error& e) {
    bad_request(param, "{}", e.what());
  }
}

void apply_chat_output(ChoiceOutput& choice, const ChatOutputFormat& format) {
  ParsedChoice parsed = parse_chat_output(choice.text, format);
  choice.text = std::move(parsed.content);
  choice.reasoning = std::move(parsed.reasoning);
  if (parsed.calls.empty()) return;
  std::vector<std::string> ids;
  for (size_t i = 0; i < parsed.calls.size(); ++i) ids.push_back(new_response_id("call_"));
  choice.tool_calls = tool_calls_json(parsed.calls, ids);
  choice.null_content = choice.text.empty();
  if (choice.finish_reason == "stop") choice.finish_reason = "tool_calls";
}

}  // namespace tokenmill::server
