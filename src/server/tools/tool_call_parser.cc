#include "server/tools/tool_call_parser.h"

#include "server/tools/format_parser.h"

namespace tokenmill::server {
namespace {

std::unique_ptr<tools_internal::FormatParser> make_format_parser(ToolCallFormat format) {
  using namespace tools_internal;
  switch (format) {
    case ToolCallFormat::kHermes: return make_hermes_parser();
    case ToolCallFormat::kQwen3Coder: return make_snapshot_parser(parse_qwen3_coder);
    case ToolCallFormat::kLlama3Json: return make_snapshot_parser(parse_llama3_json);
    case ToolCallFormat::kMistral: return make_snapshot_parser(parse_mistral);
    case ToolCallFormat::kDeepSeekV3: return make_snapshot_parser(parse_deepseek_v3);
    case ToolCallFormat::kGptOss: return make_snapshot_parser(parse_gpt_oss);
    case ToolCallFormat::kCommandR: return make_snapshot_parser(parse_command_r);
    case ToolCallFormat::kGranite: return make_snapshot_parser(parse_granite);
    case ToolCallFormat::kFunctionary: return make_snapshot_parser(parse_functionary);
  }
  return make_hermes_parser();
}

}  // namespace

void ParsedOutput::append(ParsedOutput&& more) {
  content += more.content;
  reasoning += more.reasoning;
  for (ToolCallDelta& d : more.calls) {
    if (!calls.empty() && calls.back().index == d.index && d.name.empty()) {
      calls.back().arguments += d.arguments;
    } else {
      calls.push_back(std::move(d));
    }
  }
}

ToolCallParser::ToolCallParser(ToolCallFormat format) : format_(format), impl_(make_format_parser(format)) {}
ToolCallParser::~ToolCallParser() = default;
ToolCallParser::ToolCallParser(ToolCallParser&&) noexcept = default;
ToolCallParser& ToolCallParser::operator=(ToolCallParser&&) noexcept = default;

ParsedOutput ToolCallParser::feed(std::string_view text) { return impl_->feed(text); }
ParsedOutput ToolCallParser::finish() { return impl_->finish(); }
int ToolCallParser::num_calls() const { return impl_->num_calls(); }

ParsedChoice parse_tool_calls(std::string_view text, ToolCallFormat format) {
  ToolCallParser parser(format);
  ParsedOutput all = parser.feed(text);
  all.append(parser.finish());
  return merged_choice(std::move(all));
}

ParsedChoice merged_choice(ParsedOutput&& all) {
  ParsedChoice out;
  out.content = std::move(all.content);
  out.reasoning = std::move(all.reasoning);
  for (ToolCallDelta& d : all.calls) {
    if (static_cast<size_t>(d.index) >= out.calls.size()) out.calls.resize(static_cast<size_t>(d.index) + 1);
    ToolCallOutput& c = out.calls[static_cast<size_t>(d.index)];
    if (!d.name.empty()) c.name = std::move(d.name);
    c.arguments += d.arguments;
  }
  return out;
}

}  // namespace tokenmill::server
