// A chat choice's generated text -> reasoning, content and tool calls, as
// the served template's family writes them: a think span (`<think>...
// </think>`, Qwen3 / DeepSeek-R1 / QwQ ...) becomes `reasoning_content`,
// the rest goes through the tool-call parser of the template's format
// (tools/tool_call_format.h) when tools are offered; gpt-oss's harmony
// channels always go through its parser (analysis = reasoning, final =
// content, commentary to=functions.* = calls). Incremental, for streaming
// and whole responses alike: the deltas of feed()/finish() concatenate to
// parse_chat_output's result. Not thread-safe; one per choice.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "server/reasoning_parser.h"
#include "server/tools/tool_call_parser.h"

namespace tokenmill::server {

struct ChatOutputFormat {
  ReasoningFormat reasoning = ReasoningFormat::kNone;  // resolved: kNone or kDeepSeek
  bool think_open = false;                             // the prompt ended inside <think>
  bool tool_calls = false;                             // tools offered: parse calls
  ToolCallFormat tool_format = ToolCallFormat::kHermes;
  // False when the template writes tools but no format's markers were
  // found in it: the Hermes parser is tried (and the request's log line says so).
  bool tool_format_recognised = true;

  // For the request's log line: "llama3_json", "hermes (not recognised)", ...
  std::string describe_tools() const;

  // Whether the text needs parsing at all (else it is all content).
  bool active() const {
    return reasoning != ReasoningFormat::kNone || tool_calls || tool_format == ToolCallFormat::kGptOss;
  }
};

class ChatOutputParser {
 public:
  explicit ChatOutputParser(const ChatOutputFormat& format);

  ParsedOutput feed(std::string_view text);
  ParsedOutput finish();
  int num_calls() const { return tools_ ? tools_->num_calls() : 0; }

 private:
  ParsedOutput after_reasoning(ReasoningDelta d);

  ReasoningParser reasoning_;
  std::optional<ToolCallParser> tools_;
  bool channels_;  // gpt-oss: its parser sees the raw text
};

// The whole text at once.
ParsedChoice parse_chat_output(std::string_view text, const ChatOutputFormat& format);

}  // namespace tokenmill::server
