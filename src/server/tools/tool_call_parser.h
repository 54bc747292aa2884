// A choice's generated text -> content and tool calls, incrementally, for
// streaming and whole responses alike (a whole response feeds all its text
// at once, so both report the same calls and arguments byte for byte).
//
// A call is `<tool_call>` ws `{"name": "NAME", "arguments": ARGS}` ws
// `</tool_call>` (tool_prompt.h); ARGS is reported as the model wrote it
// (JSON text, outer whitespace trimmed): an object or array ends where its
// brackets balance (outside strings), a scalar at the `}` before the
// closing tag. Text outside calls is content;
// whitespace next to a call (before, between, after) is dropped. A
// `<tool_call>` not followed by that header is content, as written.
//
// Streaming: feed() returns only what can no longer change: text that may
// still turn into `<tool_call>` (a suffix such as "<tool_") and trailing
// whitespace wait for the next piece, a call's name is reported once its
// header is complete, and (for a scalar ARGS only) a tail that may be the
// wrapper's closing `}` waits too. finish() releases everything held back: a call
// cut short (max_tokens) keeps its arguments as far as they were written;
// one cut before its header was complete (it has no name) is dropped.
//
// Not thread-safe; one per choice.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace tokenmill::server {

// A piece of one call: the first piece of a call carries its name.
struct ToolCallDelta {
  int index = 0;          // the call's position in the choice's calls
  std::string name;       // non-empty on the call's first delta only
  std::string arguments;  // the next piece of ARGS (may be empty)
};

struct ParsedOutput {
  std::string content;
  std::vector<ToolCallDelta> calls;  // in order; at most one entry per (index, first) piece

  bool empty() const { return content.empty() && calls.empty(); }
  void append(ParsedOutput&& more);
};

class ToolCallParser {
 public:
  ParsedOutput feed(std::string_view text);
  ParsedOutput finish();

  // Calls started so far (a call counts once its header is complete).
  int num_calls() const { return num_calls_; }

 private:
  enum class State { kText, kHeader, kArgs };

  // Where the arguments' JSON text stands: inside a string or not, how
  // deep in brackets, and whether an object or array value has closed.
  struct JsonLexer {
    bool in_string = false;
    bool escape = false;
    int depth = 0;
    bool closed = false;
    void step(char c);
  };

  // Each returns false when it needs more text.
  bool step_text(ParsedOutput& out);
  bool step_header(ParsedOutput& out);
  bool step_args(ParsedOutput& out);
  void emit_content(ParsedOutput& out, std::string_view text);
  void emit_args(ParsedOutput& out, std::string_view text);
  // Ends the current call at buf_[tag_at] (its closing tag); returns true.
  bool end_call(size_t tag_at);

  State state_ = State::kText;
  std::string buf_;  // text received and not yet reported
  int num_calls_ = 0;
  bool after_call_ = false;  // no content reported since the last call ended
  bool args_begun_ = false;  // the current call reported a non-space byte of ARGS
  JsonLexer lex_;            // the lexer's state at buf_[0] (kArgs)
};

// Merged result of a whole output.
struct ToolCallOutput {
  std::string name;
  std::string arguments;
};
struct ParsedChoice {
  std::string content;
  std::vector<ToolCallOutput> calls;
};
ParsedChoice parse_tool_calls(std::string_view text);

}  // namespace tokenmill::server
