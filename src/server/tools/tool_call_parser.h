// A choice's generated text -> content, reasoning and tool calls,
// incrementally, for streaming and whole responses alike (a whole response
// feeds all its text at once, so both report the same calls and arguments
// byte for byte). The wire format is one of tool_call_format.h.
//
// Every format follows the same rules:
//  - ARGS is reported as the model wrote it (JSON text, outer whitespace
//    trimmed): an object or array ends where its brackets balance (outside
//    strings). kQwen3Coder's XML parameters become a JSON object text (a
//    value that is JSON stays as written, any other is a JSON string), and
//    kLlama3Json's `N.call(k=v)` one with the Python literals as JSON.
//  - Text outside calls is content; whitespace next to a call (before,
//    between, after) is dropped. Syntax that does not turn into a call
//    (a malformed or unknown header) is content, as written.
//  - kGptOss's analysis channel is reported as `reasoning` (the only format
//    that fills it; think spans of other families are ReasoningParser's).
//
// Streaming: feed() returns only what can no longer change: text that may
// still begin a call (a suffix such as "<tool_") and trailing whitespace
// wait for the next piece, a call's name is reported once its header is
// complete, and its arguments as they arrive (less a tail that may still
// be the wrapper). finish() releases everything held back: a call cut
// short (max_tokens) keeps its arguments as far as they were written; one
// cut before its header was complete is dropped (kHermes, and a kGptOss
// message header) or, for the other formats when no call came before it
// in the same block, returned as content.
//
// Cost: kHermes is linear in the text. The other formats re-parse the
// text received so far at each feed(), but remember where the costly
// scans (an open JSON value's lexer, a search for a closing tag, a
// string's escaping) stopped, so a long call costs little more than a
// copy of its arguments per feed: a 32 KiB call fed 4 bytes at a time
// took 5-15 ms in all (Release, one core) against 0.5 ms for kHermes.
//
// Not thread-safe; one per choice.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "server/tools/tool_call_format.h"

namespace tokenmill::server {

// A piece of one call: the first piece of a call carries its name.
struct ToolCallDelta {
  int index = 0;          // the call's position in the choice's calls
  std::string name;       // non-empty on the call's first delta only
  std::string arguments;  // the next piece of ARGS (may be empty)
};

struct ParsedOutput {
  std::string content;
  std::string reasoning;             // kGptOss's analysis channel only
  std::vector<ToolCallDelta> calls;  // in order; at most one entry per (index, first) piece

  bool empty() const { return content.empty() && reasoning.empty() && calls.empty(); }
  void append(ParsedOutput&& more);
};

namespace tools_internal {
class FormatParser;
}

class ToolCallParser {
 public:
  explicit ToolCallParser(ToolCallFormat format = ToolCallFormat::kHermes);
  ~ToolCallParser();
  ToolCallParser(ToolCallParser&&) noexcept;
  ToolCallParser& operator=(ToolCallParser&&) noexcept;

  ParsedOutput feed(std::string_view text);
  ParsedOutput finish();

  // Calls started so far (a call counts once its header is complete).
  int num_calls() const;
  ToolCallFormat format() const { return format_; }

 private:
  ToolCallFormat format_;
  std::unique_ptr<tools_internal::FormatParser> impl_;
};

// Merged result of a whole output.
struct ToolCallOutput {
  std::string name;
  std::string arguments;
};
struct ParsedChoice {
  std::string content;
  std::string reasoning;
  std::vector<ToolCallOutput> calls;
};
// All the deltas of one output merged: each call's name and whole arguments.
ParsedChoice merged_choice(ParsedOutput&& all);
ParsedChoice parse_tool_calls(std::string_view text, ToolCallFormat format = ToolCallFormat::kHermes);

}  // namespace tokenmill::server
