#include "server/chat_prompt.h"

#include <fmt/format.h>

#include "server/api_error.h"
#include "server/tools/tool_prompt.h"

namespace tokenmill::server {

namespace {

// Tools and tool turns as system/user/assistant text (tools/tool_prompt.h).
ChatConversation folded_conversation(const ChatConversation& c) {
  ChatConversation out;
  for (tokenizer::ChatMessage& m : template_messages(c.messages, c.tool_request)) {
    ApiMessage a;
    a.role = std::move(m.role);
    a.content = std::move(m.content);
    out.messages.push_back(std::move(a));
  }
  out.template_kwargs = c.template_kwargs;
  out.reasoning_effort = c.reasoning_effort;
  return out;
}

[[noreturn]] void template_failed(const jinja::TemplateError& e) {
  if (e.kind() == jinja::ErrorKind::kLimit)
    throw ApiError(500, fmt::format("the chat template exceeded the renderer's bounds: {}", e.what()), "server_error",
                   std::nullopt, "chat_template_limit");
  bad_request("messages", "the model's chat template refused the conversation: {}", e.what());
}

std::string_view trimmed(std::string_view s) {
  const size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
}

// vLLM's continue_final_message for a template: the conversation rendered
// without a generation prompt, cut right after the last message's content.
std::string cut_after_final_message(std::string text, const ChatConversation& c) {
  const std::string_view needle = trimmed(c.messages.back().content);
  const size_t at = needle.empty() ? std::string::npos : text.rfind(needle);
  if (at == std::string::npos)
    bad_request("continue_final_message",
                "the chat template does not write the final message's content as sent, so it cannot be continued");
  text.resize(at + needle.size());
  return text;
}

std::string render_jinja(const ChatFormat& f, const ChatTemplate& t, const ChatConversation& c,
                         const ChatRenderOptions& o) {
  const bool agp = o.add_generation_prompt && !o.continue_final_message;
  std::string text;
  try {
    text = t.handles_tools ? t.tmpl.render(chat_template_context(c, agp, f.bos_text, f.eos_text))
                           : t.tmpl.render(chat_template_context(folded_conversation(c), agp, f.bos_text, f.eos_text));
  } catch (const jinja::TemplateError& e) {
    template_failed(e);
  }
  return o.continue_final_message ? cut_after_final_message(std::move(text), c) : text;
}

std::string render_preset(const ChatFormat& f, const ChatConversation& c, const ChatRenderOptions& o) {
  const std::vector<tokenizer::ChatMessage> turns = template_messages(c.messages, c.tool_request);
  try {
    return o.continue_final_message ? tokenizer::render_chat_continuation(f.kind, turns, f.bos_text)
                                    : tokenizer::render_chat(f.kind, turns, o.add_generation_prompt, f.bos_text);
  } catch (const Error& e) {
    bad_request("messages", "{}", e.what());
  }
}

}  // namespace

std::string render_chat_text(const ChatFormat& format, const ChatConversation& conversation,
                             const ChatRenderOptions& options) {
  if (const ChatTemplate* t = format.template_for(conversation)) return render_jinja(format, *t, conversation, options);
  return render_preset(format, conversation, options);
}

std::vector<int32_t> chat_prompt_tokens(const ChatFormat& format, const tokenizer::Tokenizer& tok,
                                        const ChatConversation& conversation, const ChatRenderOptions& options) {
  return chat_prompt(format, tok, conversation, options).ids;
}

ChatPrompt chat_prompt(const ChatFormat& format, const tokenizer::Tokenizer& tok, const ChatConversation& conversation,
                       const ChatRenderOptions& options) {
  std::string text = render_chat_text(format, conversation, options);
  // A Jinja template usually writes {{ bos_token }} itself; the presets
  // never do. Either way the prompt starts with exactly one BOS when the
  // model asks for one.
  std::vector<int32_t> ids = tok.encode(text, /*add_special=*/false, /*parse_special=*/true);
  const int32_t bos = tok.bos_id();
  if (tok.add_bos() && bos >= 0 && (ids.empty() || ids.front() != bos)) ids.insert(ids.begin(), bos);
  if (options.add_special_tokens && tok.add_bos() && bos >= 0) ids.insert(ids.begin(), bos);
  return {std::move(text), std::move(ids)};
}

ChatConversation plain_conversation(const std::vector<tokenizer::ChatMessage>& messages) {
  ChatConversation c;
  for (const tokenizer::ChatMessage& m : messages) {
    ApiMessage a;
    a.role = m.role;
    a.content = m.content;
    c.messages.push_back(std::move(a));
  }
  return c;
}

}  // namespace tokenmill::server
