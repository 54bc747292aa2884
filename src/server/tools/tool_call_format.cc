#include "server/tools/tool_call_format.h"

namespace tokenmill::server {
namespace {

bool has(std::string_view s, std::string_view marker) { return s.find(marker) != std::string_view::npos; }

}  // namespace

ToolCallFormat detect_tool_call_format(std::string_view t) {
  // Most specific markers first: several templates share generic ones
  // (<tool_call>, <function=, <|python_tag|>).
  if (has(t, "<｜tool▁calls▁begin｜>") || has(t, "<｜tool▁call▁begin｜>")) return ToolCallFormat::kDeepSeekV3;
  if (has(t, "<|channel|>") && has(t, "<|message|>")) return ToolCallFormat::kGptOss;
  if (has(t, "<function=") && has(t, "<parameter=")) return ToolCallFormat::kQwen3Coder;
  if (has(t, "[TOOL_CALLS]")) return ToolCallFormat::kMistral;
  if (has(t, "<|tool_call|>")) return ToolCallFormat::kGranite;
  if (has(t, "<|START_ACTION|>") || has(t, "Action: ```json") ||
      (has(t, "<|START_OF_TURN_TOKEN|>") && has(t, "tool_name")))
    return ToolCallFormat::kCommandR;
  if (has(t, ">>>all") || has(t, "<function=")) return ToolCallFormat::kFunctionary;
  if (has(t, "<tool_call>")) return ToolCallFormat::kHermes;
  if (has(t, "<|python_tag|>") || (has(t, "<|start_header_id|>") && has(t, "\"parameters\"")))
    return ToolCallFormat::kLlama3Json;
  return ToolCallFormat::kHermes;
}

std::string_view tool_call_format_name(ToolCallFormat format) {
  switch (format) {
    case ToolCallFormat::kHermes: return "hermes";
    case ToolCallFormat::kQwen3Coder: return "qwen3_coder";
    case ToolCallFormat::kLlama3Json: return "llama3_json";
    case ToolCallFormat::kMistral: return "mistral";
    case ToolCallFormat::kDeepSeekV3: return "deepseek_v3";
    case ToolCallFormat::kGptOss: return "gpt_oss";
    case ToolCallFormat::kCommandR: return "command_r";
    case ToolCallFormat::kGranite: return "granite";
    case ToolCallFormat::kFunctionary: return "functionary";
  }
  return "hermes";
}

}  // namespace tokenmill::server
