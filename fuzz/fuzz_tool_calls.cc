// The tool-call parsers of every format and the reasoning parser on
// arbitrary model output: no crash, and the streamed parse (pieces of a
// size the input's second byte picks) concatenates to the whole parse.
// Input: [format byte][step byte][output text]; the step byte's top bit
// says whether the prompt opened a think span.
#include <cstdint>
#include <string>
#include <string_view>

#include "server/reasoning_parser.h"
#include "server/tools/tool_call_parser.h"

using namespace tokenmill::server;

namespace {

ParsedChoice streamed(std::string_view text, ToolCallFormat format, size_t step) {
  ToolCallParser parser(format);
  ParsedOutput all;
  for (size_t i = 0; i < text.size(); i += step) all.append(parser.feed(text.substr(i, step)));
  all.append(parser.finish());
  ParsedChoice out{std::move(all.content), std::move(all.reasoning), {}};
  for (ToolCallDelta& d : all.calls) {
    if (!d.name.empty()) {
      if (static_cast<size_t>(d.index) != out.calls.size()) __builtin_trap();
      out.calls.push_back({d.name, ""});
    }
    if (out.calls.empty() || static_cast<size_t>(d.index) + 1 != out.calls.size()) __builtin_trap();
    out.calls.back().arguments += d.arguments;
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const auto format = static_cast<ToolCallFormat>(data[0] % 9);
  const size_t step = 1 + data[1] % 16;
  const std::string_view text(reinterpret_cast<const char*>(data + 2), size - 2);
  const ParsedChoice whole = parse_tool_calls(text, format);
  const ParsedChoice pieces = streamed(text, format, step);
  if (whole.content != pieces.content || whole.reasoning != pieces.reasoning ||
      whole.calls.size() != pieces.calls.size())
    __builtin_trap();
  for (size_t i = 0; i < whole.calls.size(); ++i)
    if (whole.calls[i].name != pieces.calls[i].name || whole.calls[i].arguments != pieces.calls[i].arguments)
      __builtin_trap();
  const bool open = data[1] & 0x80;
  const ReasoningDelta r = parse_reasoning(text, ReasoningFormat::kDeepSeek, open);
  ReasoningParser rp(ReasoningFormat::kDeepSeek, open);
  ReasoningDelta s;
  for (size_t i = 0; i < text.size(); i += step) {
    ReasoningDelta d = rp.feed(text.substr(i, step));
    s.reasoning += d.reasoning;
    s.content += d.content;
  }
  ReasoningDelta d = rp.finish();
  if (r.reasoning != s.reasoning + d.reasoning || r.content != s.content + d.content) __builtin_trap();
  return 0;
}
