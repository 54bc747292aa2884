// Reasoning ("think" spans) apart from the answer, incrementally, for
// streaming and whole responses alike.
//
// A reasoning model writes `<think>REASONING</think>ANSWER`; Qwen3 and
// DeepSeek-R1 templates end the generation prompt with `<think>\n`, so
// their output starts inside the span (template_opens_think tells).
// ReasoningFormat says what to do with it, like llama.cpp's
// --reasoning-format:
//   kNone      the think text stays in the content, as written
//   kDeepSeek  the span is extracted into `reasoning`
//   kAuto      extracted when the chat template uses think tags
//              (resolve_reasoning_format decides, once per model)
//
// Rules: a think span counts only at the start of the output (after
// whitespace) or when the prompt opened it (a model that writes `<think>`
// again then has it dropped); a `<think>` anywhere else is content. Whitespace at both ends of the reasoning is
// dropped, and so is whitespace after `</think>`, as DeepSeek's and Qwen's servers do. A span never closed (max_tokens,
// or a model that does not close it) is reasoning to the end.
//
// Streaming: feed() returns only what can no longer change: the start of
// an output that may still become `<think>`, a tail that may still become
// `</think>` and the reasoning's trailing whitespace wait for the next
// piece; finish() releases them. The pieces concatenate to the whole
// parse byte for byte.
//
// gpt-oss writes its reasoning in the harmony analysis channel, which
// ToolCallParser(ToolCallFormat::kGptOss) reports as ParsedOutput::reasoning
// (it must see the channel markers); use kNone here for gpt-oss.
//
// The caller chains the parsers: this one first, its content into the
// ToolCallParser. Not thread-safe; one per choice.
#pragma once

#include <string>
#include <string_view>

namespace tokenmill::server {

enum class ReasoningFormat { kNone, kDeepSeek, kAuto };

// kAuto -> kDeepSeek when the template's source mentions think tags, else
// kNone; the others unchanged.
ReasoningFormat resolve_reasoning_format(ReasoningFormat format, std::string_view template_source);

// Whether the rendered prompt ends inside an opened think span (`<think>`
// then optional whitespace).
bool template_opens_think(std::string_view rendered_prompt);

struct ReasoningDelta {
  std::string reasoning;
  std::string content;

  bool empty() const { return reasoning.empty() && content.empty(); }
};

class ReasoningParser {
 public:
  // `think_open`: the prompt opened the span (template_opens_think).
  // kNone passes everything through as content; kAuto acts as kDeepSeek
  // (resolve it first to honour the template).
  explicit ReasoningParser(ReasoningFormat format = ReasoningFormat::kDeepSeek, bool think_open = false);

  ReasoningDelta feed(std::string_view text);
  ReasoningDelta finish();

 private:
  enum class State { kStart, kThink, kAfterThink, kContent };

  // Each returns false when it needs more text.
  bool step_start();
  bool step_think(ReasoningDelta& out);
  bool step_after_think();
  void emit_reasoning(ReasoningDelta& out, std::string_view text);

  State state_;
  bool prompt_opened_;  // the span began in the prompt (a repeated <think> is dropped)
  std::string buf_;     // text received and not yet reported
  bool reasoning_begun_ = false;
};

// Splits a whole output.
ReasoningDelta parse_reasoning(std::string_view text, ReasoningFormat format, bool think_open);

}  // namespace tokenmill::server
