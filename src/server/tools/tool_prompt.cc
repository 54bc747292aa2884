#include "server/tools/tool_prompt.h"

#include <nlohmann/json.hpp>

namespace tokenmill::server {
namespace {

std::string dump(const RequestJson& j) { return j.dump(-1, ' ', false, RequestJson::error_handler_t::replace); }

// What the model should do, by tool_choice (the grammar enforces it; the
// text only makes the constrained output likelier to be sensible).
std::string choice_instruction(const ToolsRequest& tools) {
  switch (tools.mode) {
    case ToolChoiceMode::kRequired:
      return tools.parallel ? "You must call at least one function." : "You must call exactly one function.";
    case ToolChoiceMode::kNamed: return "You must call the function " + dump(RequestJson(tools.named)) + ".";
    case ToolChoiceMode::kAuto:
    case ToolChoiceMode::kNone: break;
  }
  return tools.parallel ? "Call functions when they help; otherwise answer in plain text."
                        : "Call at most one function when it helps; otherwise answer in plain text.";
}

void merge_into_user(std::vector<tokenizer::ChatMessage>& out, bool merge, const std::string& text,
                     const char* separator) {
  if (merge) {
    out.back().content += separator;
    out.back().content += text;
  } else {
    out.push_back({"user", text});
  }
}

}  // namespace

std::string tool_call_text(const std::string& name, const std::string& arguments) {
  std::string args = arguments;
  if (!RequestJson::accept(arguments)) args = dump(RequestJson(arguments));
  std::string out(kToolCallOpen);
  out += "\n{\"name\": " + dump(RequestJson(name)) + ", \"arguments\": " + args + "}\n";
  out += kToolCallClose;
  return out;
}

std::string tools_system_text(const ToolsRequest& tools) {
  std::string out = "You can call these functions (one JSON description per line):\n";
  for (const ToolDefinition& t : tools.tools) {
    RequestJson fn = {{"name", t.name}};
    if (!t.description.empty()) fn["description"] = t.description;
    fn["parameters"] = t.parameters;
    out += dump(RequestJson{{"type", "function"}, {"function", std::move(fn)}});
    out += '\n';
  }
  out += "\nTo call a function, reply with one block per call and nothing else:\n";
  out += tool_call_text("FUNCTION_NAME", "{\"ARGUMENT\": \"VALUE\"}");
  out +=
      "\nThe arguments are a JSON object that matches the function's parameters. Results come back in "
      "<tool_response> blocks. ";
  out += choice_instruction(tools);
  return out;
}

std::vector<tokenizer::ChatMessage> template_messages(const std::vector<ApiMessage>& messages,
                                                      const ToolsRequest& tools) {
  std::vector<tokenizer::ChatMessage> out;
  bool last_is_results = false;  // out.back() is a user turn built from tool results
  for (const ApiMessage& m : messages) {
    if (m.role == "tool") {
      const std::string block = "<tool_response>\n" + m.content + "\n</tool_response>";
      merge_into_user(out, last_is_results, block, "\n");
      last_is_results = true;
      continue;
    }
    if (m.role == "user" && last_is_results) {
      merge_into_user(out, true, m.content, "\n\n");
      last_is_results = false;
      continue;
    }
    std::string text = m.content;
    for (const ToolCallRecord& c : m.tool_calls) {
      if (!text.empty()) text += '\n';
      text += tool_call_text(c.name, c.arguments);
    }
    out.push_back({m.role, std::move(text)});
    last_is_results = false;
  }
  if (tools.active()) {
    const std::string system = tools_system_text(tools);
    if (!out.empty() && out.front().role == "system") {
      out.front().content += "\n\n" + system;
    } else {
      out.insert(out.begin(), {"system", system});
    }
  }
  return out;
}

}  // namespace tokenmill::server
