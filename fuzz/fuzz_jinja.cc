// libFuzzer target for the sandboxed Jinja engine (src/jinja/template.h):
// the input is template text, rendered over a small fixed conversation.
//
// Contract: TemplateError is the only clean rejection (a syntax error,
// raise_exception, a runtime error, a Limits bound), and its message names
// a line and column. A template that parses renders the same text twice
// (parse once, render many), unless it reads the clock (strftime_now).
// Anything else (another exception, a crash, a hang past the limits) is a bug.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "jinja/template.h"

namespace {

void require(bool ok) {
  if (!ok) std::abort();
}

const nlohmann::ordered_json& context() {
  static const auto* ctx = new nlohmann::ordered_json(nlohmann::ordered_json::parse(R"({
    "messages": [
      {"role": "system", "content": "Be brief."},
      {"role": "user", "content": "Hi \u00e9 'q' \"d\""},
      {"role": "assistant", "content": "", "tool_calls": [{"type": "function",
        "function": {"name": "get_weather", "arguments": {"city": "Paris", "days": [1, 2.5, true, null]}}}]},
      {"role": "tool", "content": "{\"temp\": 21}"}
    ],
    "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather.",
      "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}],
    "add_generation_prompt": true, "bos_token": "<s>", "eos_token": "</s>", "enable_thinking": false
  })"));
  return *ctx;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view source(reinterpret_cast<const char*>(data), size);
  tokenmill::jinja::Limits limits;
  limits.max_steps = 200'000;
  limits.max_output_bytes = 1 << 20;
  limits.max_depth = 50;
  limits.max_seconds = 2.0;
  try {
    const tokenmill::jinja::Template t = tokenmill::jinja::Template::parse(source);
    const std::string first = t.render(context(), limits);
    if (!t.mentions("strftime_now")) require(t.render(context(), limits) == first);
  } catch (const tokenmill::jinja::TemplateError& e) {
    require(std::string_view(e.what()).starts_with("chat template line "));
    require(e.line() >= 1 && e.column() >= 1);
  }
  return 0;
}
