// A sandboxed Jinja template engine for chat templates: the model file's
// `tokenizer.chat_template` (untrusted text from a download) rendered the
// way Hugging Face's `apply_chat_template` renders it with Python's jinja2
// (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, the
// loopcontrols extension, the `generation` block tag, `tojson` without
// ASCII escaping, `raise_exception` and `strftime_now`), so that the prompt
// a model sees here is byte for byte the one its authors tested.
//
// Sandbox: a template sees only its render context and the built-ins; it
// cannot reach files, the environment, or attributes of Python objects that
// do not exist here. Every render is bounded (Limits): output bytes,
// evaluation steps (loop iterations, expression nodes), call depth
// (macros, recursion) and wall time. Exceeding a bound throws LimitError,
// never aborts the process.
//
// Thread-safety: a parsed Template is immutable; render() may run on many
// threads at once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "util/error.h"

namespace tokenmill::jinja {

// Hugging Face's environment settings are the defaults.
struct ParseOptions {
  bool trim_blocks = true;             // drop the first newline after a block tag
  bool lstrip_blocks = true;           // strip spaces/tabs before a block tag at a line's start
  bool keep_trailing_newline = false;  // jinja2's default: one trailing '\n' of the source is dropped
};

struct Limits {
  size_t max_output_bytes = size_t{16} << 20;  // the rendered text, and any one string built on the way
  uint64_t max_steps = 20'000'000;             // evaluated nodes + loop iterations
  int max_depth = 200;                         // nesting of macro calls / recursive loops / expressions
  double max_seconds = 5.0;                    // wall time of one render
};

// What went wrong, for callers that map errors to HTTP statuses:
//   kSyntax  the template does not parse (a bad model file or --chat-template-file);
//   kRaised  the template called raise_exception (it refuses this conversation: a 400);
//   kRender  a runtime error (undefined operation, bad type, sandbox denial);
//   kLimit   a Limits bound was exceeded.
enum class ErrorKind { kSyntax, kRaised, kRender, kLimit };

// Every error names the template's line and column (1-based) where it
// happened: "chat template line 12, column 5: ...".
class TemplateError : public tokenmill::Error {
 public:
  TemplateError(ErrorKind kind, int line, int column, const std::string& message);
  ErrorKind kind() const { return kind_; }
  int line() const { return line_; }
  int column() const { return column_; }
  // The message without the location prefix (e.g. raise_exception's text).
  const std::string& detail() const { return detail_; }

 private:
  ErrorKind kind_;
  int line_;
  int column_;
  std::string detail_;
};

struct Program;  // the parsed tree (internal)

class Template {
 public:
  // Throws TemplateError(kSyntax) naming line and column.
  static Template parse(std::string_view source, const ParseOptions& options = {});

  // Renders with `context` as the template's variables (top-level object
  // keys; key order is kept, as Python dicts keep it, so `tojson` and
  // `items()` see the request's order). Throws TemplateError.
  std::string render(const nlohmann::ordered_json& context, const Limits& limits = {}) const;

  // Whether the source mentions `name` as a variable anywhere (e.g.
  // "tools", "enable_thinking"): a cheap textual check callers use to
  // decide whether a template handles tools itself.
  bool mentions(std::string_view name) const;

  const std::string& source() const;

 private:
  std::shared_ptr<const Program> program_;
};

}  // namespace tokenmill::jinja
