#include "server/chat_output.h"

namespace tokenmill::server {

std::string ChatOutputFormat::describe_tools() const {
  std::string name(tool_call_format_name(tool_format));
  return tool_format_recognised ? name : name + " (the template's format was not recognised)";
}

ChatOutputParser::ChatOutputParser(const ChatOutputFormat& format)
    : reasoning_(format.reasoning, format.think_open), channels_(format.tool_format == ToolCallFormat::kGptOss) {
  if (format.tool_calls || channels_) tools_.emplace(format.tool_format);
}

ParsedOutput ChatOutputParser::after_reasoning(ReasoningDelta d) {
  ParsedOutput out;
  if (tools_) {
    out = tools_->feed(d.content);
  } else {
    out.content = std::move(d.content);
  }
  out.reasoning = std::move(d.reasoning) + out.reasoning;
  return out;
}

ParsedOutput ChatOutputParser::feed(std::string_view text) {
  if (channels_) return tools_->feed(text);
  return after_reasoning(reasoning_.feed(text));
}

ParsedOutput ChatOutputParser::finish() {
  if (channels_) return tools_->finish();
  ParsedOutput out = after_reasoning(reasoning_.finish());
  if (tools_) out.append(tools_->finish());
  return out;
}

ParsedChoice parse_chat_output(std::string_view text, const ChatOutputFormat& format) {
  ChatOutputParser parser(format);
  ParsedOutput all = parser.feed(text);
  all.append(parser.finish());
  return merged_choice(std::move(all));
}

}  // namespace tokenmill::server
