#include "server/tools/tool_grammar.h"

#include "grammar/json_schema.h"
#include "server/constraint_request.h"
#include "server/tools/tool_prompt.h"
#include "util/check.h"
#include "util/error.h"

namespace tokenmill::server {
namespace {

// The rules of one callable function: `fnK` is the name and arguments part
// of a call ("\"NAME\", \"arguments\": " ARGS); its schema's rules are
// named fnK-args-* (json_schema_rules prefixes its helpers), so they can
// clash neither with another function's nor with the tc-* rules below.
std::string function_rules(const ToolDefinition& t, size_t k, const grammar::GrammarLimits& limits,
                           const grammar::Deadline& deadline) {
  const std::string rule = "fn" + std::to_string(k);
  std::string args_rules;
  try {
    args_rules = grammar::json_schema_rules(t.parameters, rule + "-args", limits, deadline);
  } catch (const Error& e) {
    fail("function '{}' parameters: {}", t.name, e.what());
  }
  std::string out = rule + " ::= " + gbnf_literal("\"" + t.name + "\", \"arguments\": ") + " " + rule + "-args\n";
  out += args_rules;
  if (!out.empty() && out.back() != '\n') out += '\n';
  return out;
}

}  // namespace

std::string tool_call_gbnf(const ToolsRequest& tools, const grammar::GrammarLimits& limits,
                           const grammar::Deadline& deadline) {
  TM_CHECK(tools.active());
  const bool one_call = tools.mode == ToolChoiceMode::kNamed || !tools.parallel;
  std::string out = "root ::= ";
  out += one_call ? "tc-call" : "tc-calls";
  if (tools.mode == ToolChoiceMode::kAuto) out += " | tc-text";
  out += '\n';
  if (!one_call) out += "tc-calls ::= tc-call (\"\\n\" tc-call)*\n";
  out += "tc-call ::= " + gbnf_literal(std::string(kToolCallOpen) + "\n{\"name\": ") + " tc-fn " +
         gbnf_literal("}\n" + std::string(kToolCallClose)) + "\n";
  if (tools.mode == ToolChoiceMode::kAuto) out += "tc-text ::= [^< \\t\\r\\n] .*\n";
  std::string alternatives, rules;
  for (size_t k = 0; k < tools.tools.size(); ++k) {
    const ToolDefinition& t = tools.tools[k];
    if (tools.mode == ToolChoiceMode::kNamed && t.name != tools.named) continue;
    if (!alternatives.empty()) alternatives += " | ";
    alternatives += "fn" + std::to_string(k);
    rules += function_rules(t, k, limits, deadline);
    deadline.check("tool grammar");
  }
  out += "tc-fn ::= " + alternatives + "\n" + rules;
  if (out.size() > limits.max_gbnf_bytes)
    fail("the tools' grammar is {} bytes, over the limit of {}; declare fewer or simpler functions", out.size(),
         limits.max_gbnf_bytes);
  return out;
}

}  // namespace tokenmill::server
