// The wire formats in which model families write tool calls, and which one
// a chat template asks for. Pure functions.
//
//   kHermes       Hermes, Qwen2.5, Qwen3: <tool_call>\n{"name": N, "arguments": A}\n</tool_call>
//   kQwen3Coder   <tool_call>\n<function=N>\n<parameter=P>\nVALUE\n</parameter>\n</function>\n</tool_call>
//                 (a Hermes JSON object inside <tool_call> is accepted too)
//   kLlama3Json   Llama 3.1-3.3: the whole output is {"name": N, "parameters": A}, several
//                 separated by ';'; or <|python_tag|> then such a call or N.call(k=v, ...)
//   kMistral      [TOOL_CALLS][{"name": N, "arguments": A}, ...] or [TOOL_CALLS]N[ARGS]A
//   kDeepSeekV3   <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>N\n```json\nA\n```
//                 <｜tool▁call▁end｜>...<｜tool▁calls▁end｜> (V3, R1); V3.1: ...begin｜>N<｜tool▁sep｜>A<｜...
//   kGptOss       harmony channels: <|channel|>commentary to=functions.N <|constrain|>json<|message|>A<|call|>,
//                 <|channel|>final<|message|>TEXT, <|channel|>analysis<|message|>REASONING
//   kCommandR     Action: ```json\n[{"tool_name": N, "parameters": A}, ...]\n``` (also
//                 <|START_ACTION|>[...]<|END_ACTION|>)
//   kGranite      <|tool_call|>[{"name": N, "arguments": A}, ...]
//   kFunctionary  v3.1 <function=N>A</function>; v3.2 >>>N\nA segments (>>>all\nTEXT is text)
#pragma once

#include <string_view>

namespace tokenmill::server {

enum class ToolCallFormat {
  kHermes,
  kQwen3Coder,
  kLlama3Json,
  kMistral,
  kDeepSeekV3,
  kGptOss,
  kCommandR,
  kGranite,
  kFunctionary,
};

// The format a Jinja chat template's source asks the model to write, found
// by the markers it renders (kHermes when none is recognised).
ToolCallFormat detect_tool_call_format(std::string_view template_source);

// A short stable name ("hermes", "qwen3_coder", "llama3_json", "mistral",
// "deepseek_v3", "gpt_oss", "command_r", "granite", "functionary").
std::string_view tool_call_format_name(ToolCallFormat format);

}  // namespace tokenmill::server
