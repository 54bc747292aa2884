#include "server/tools/tool_grammar.h"

#include "grammar/json_schema.h"
#include "server/constraint_request.h"
#include "server/tools/tool_prompt.h"
#include "util/check.h"
#include "util/error.h"

namespace tokenmill::server {
namespace {

// How a family writes a list of calls: list_open, then calls separated by
// `separator`, then list_close; a call is call_open, name_before NAME
// name_after, the arguments' JSON, call_close.
struct ToolWire {
  std::string_view list_open;
  std::string_view call_open;
  std::string_view name_before;
  std::string_view name_after;
  std::string_view call_close;
  std::string_view separator;
  std::string_view list_close;
};

// Each matches what the family's parser reads (tool_call_parser.h).
// kQwen3Coder's XML parameters cannot carry a JSON schema's constraints
// simply, so its grammar is the Hermes JSON call inside <tool_call>, which
// its parser reads too.
ToolWire tool_wire(ToolCallFormat format) {
  switch (format) {
    case ToolCallFormat::kLlama3Json: return {"", "{\"name\": ", "\"", "\", \"parameters\": ", "}", "; ", ""};
    case ToolCallFormat::kMistral: return {"[TOOL_CALLS][", "{\"name\": ", "\"", "\", \"arguments\": ", "}", ", ", "]"};
    case ToolCallFormat::kGranite:
      return {"<|tool_call|>[", "{\"name\": ", "\"", "\", \"arguments\": ", "}", ", ", "]"};
    case ToolCallFormat::kCommandR:
      return {"Action: ```json\n[", "{\"tool_name\": ", "\"", "\", \"parameters\": ", "}", ", ", "]\n```"};
    case ToolCallFormat::kDeepSeekV3:
      return {"<｜tool▁calls▁begin｜>",
              "<｜tool▁call▁begin｜>function<｜tool▁sep｜>",
              "",
              "\n```json\n",
              "\n```<｜tool▁call▁end｜>",
              "\n",
              "<｜tool▁calls▁end｜>"};
    case ToolCallFormat::kGptOss:
      return {"", "<|channel|>commentary to=functions.", "", " <|constrain|>json<|message|>", "<|call|>", "", ""};
    case ToolCallFormat::kFunctionary: return {"", "<function=", "", ">", "</function>", "", ""};
    case ToolCallFormat::kHermes:
    case ToolCallFormat::kQwen3Coder: break;
  }
  return {"", "<tool_call>\n{\"name\": ", "\"", "\", \"arguments\": ", "}\n</tool_call>", "\n", ""};
}

// The rules of one callable function: `fnK` is the name and arguments part
// of a call (name_before NAME name_after ARGS); its schema's rules are
// named fnK-args-* (json_schema_rules prefixes its helpers), so they can
// clash neither with another function's nor with the tc-* rules below.
std::string function_rules(const ToolDefinition& t, size_t k, const ToolWire& wire,
                           const grammar::GrammarLimits& limits, const grammar::Deadline& deadline) {
  const std::string rule = "fn" + std::to_string(k);
  std::string args_rules;
  try {
    args_rules = grammar::json_schema_rules(t.parameters, rule + "-args", limits, deadline);
  } catch (const Error& e) {
    fail("function '{}' parameters: {}", t.name, e.what());
  }
  const std::string head = std::string(wire.name_before) + t.name + std::string(wire.name_after);
  std::string out = rule + " ::= " + gbnf_literal(head) + " " + rule + "-args\n";
  out += args_rules;
  if (!out.empty() && out.back() != '\n') out += '\n';
  return out;
}

// "auto": plain text whose first character can begin no call (nor is
// whitespace), so text can never begin a call the grammar did not check.
std::string text_rule(const ToolWire& wire) {
  const std::string opener = std::string(wire.list_open) + std::string(wire.call_open);
  std::string excluded;
  if (!opener.empty()) {
    const char c = opener[0];
    if (c == '[' || c == ']' || c == '\\' || c == '^' || c == '-') excluded += '\\';
    excluded += c;
  }
  return "tc-text ::= [^" + excluded + " \\t\\r\\n] .*\n";
}

// A literal rule part, or nothing for an empty one.
std::string lit(std::string_view s) { return s.empty() ? std::string() : gbnf_literal(s) + " "; }

}  // namespace

std::string tool_call_gbnf(const ToolsRequest& tools, const grammar::GrammarLimits& limits,
                           const grammar::Deadline& deadline, ToolCallFormat format) {
  TM_CHECK(tools.active());
  const ToolWire wire = tool_wire(format);
  const bool one_call = tools.mode == ToolChoiceMode::kNamed || !tools.parallel;
  std::string out = "root ::= tc-list";
  if (tools.mode == ToolChoiceMode::kAuto) out += " | tc-text";
  out += '\n';
  out += "tc-list ::= " + lit(wire.list_open) + "tc-call ";
  if (!one_call) out += "(" + lit(wire.separator) + "tc-call)* ";
  out += lit(wire.list_close) + "\n";
  out += "tc-call ::= " + lit(wire.call_open) + "tc-fn " + lit(wire.call_close) + "\n";
  if (tools.mode == ToolChoiceMode::kAuto) out += text_rule(wire);
  std::string alternatives, rules;
  for (size_t k = 0; k < tools.tools.size(); ++k) {
    const ToolDefinition& t = tools.tools[k];
    if (tools.mode == ToolChoiceMode::kNamed && t.name != tools.named) continue;
    if (!alternatives.empty()) alternatives += " | ";
    alternatives += "fn" + std::to_string(k);
    rules += function_rules(t, k, wire, limits, deadline);
    deadline.check("tool grammar");
  }
  out += "tc-fn ::= " + alternatives + "\n" + rules;
  if (out.size() > limits.max_gbnf_bytes)
    fail("the tools' grammar is {} bytes, over the limit of {}; declare fewer or simpler functions", out.size(),
         limits.max_gbnf_bytes);
  return out;
}

}  // namespace tokenmill::server
