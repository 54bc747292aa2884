#include "server/tools/tool_call_format.h"

namespace tokenmill::server {
namespace {

bool template_has(std::string_view s, std::string_view marker) { return s.find(marker) != std::string_view::npos; }

}  // namespace

ToolCallFormat detect_tool_call_format(std::string_view t) {
  // Most specific markers first: several templates share generic ones
  // (<tool_call>, <function=, <|python_tag|>).
  if (template_has(t, "<｜tool▁calls▁begin｜>") || template_has(t, "<｜tool▁call▁begin｜>"))
    return ToolCallFormat::kDeepSeekV3;
  if (template_has(t, "<|channel|>") && template_has(t, "<|message|>")) return ToolCallFormat::kGptOss;
  if (template_has(t, "<function=") && template_has(t, "<parameter=")) return ToolCallFormat::kQwen3Coder;
  if (template_has(t, "[TOOL_CALLS]")) return ToolCallFormat::kMistral;
  if (template_has(t, "<|tool_call|>")) return ToolCallFormat::kGranite;
  if (template_has(t, "<|START_ACTION|>") || template_has(t, "Action: ```json") ||
      (template_has(t, "<|START_OF_TURN_TOKEN|>") && template_has(t, "tool_name")))
    return ToolCallFormat::kCommandR;
  if (template_has(t, ">>>all") || template_has(t, "<function=")) return ToolCallFormat::kFunctionary;
  if (template_has(t, "<tool_call>")) return ToolCallFormat::kHermes;
  if (template_has(t, "<|python_tag|>") ||
      (template_has(t, "<|start_header_id|>") && template_has(t, "\"parameters\"")))
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
