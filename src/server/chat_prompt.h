// Which chat template a served model uses, and a conversation -> prompt
// text and token ids. Chosen once at start-up:
//  1. --chat-template FILE (or --chat-template-file FILE): a Jinja
//     template, rendered by the project's own sandboxed engine (jinja/);
//     --chat-template NAME: one of the built-in presets (tokenizer/
//     chat_template.h: gemma, llama2, llama3, chatml, mistral, phi3);
//  2. else the GGUF's tokenizer.chat_template, rendered as written (and
//     its named `tokenizer.chat_template.tool_use` for requests that offer
//     tools, as Hugging Face picks it); a template that does not parse
//     falls back to the preset its markers name, with a warning;
//  3. else the preset named by the vocabulary's turn markers
//     (<start_of_turn>, <|im_start|>, ...): the GGUF of the default Gemma 3
//     270M carries no template;
//  a model with none of these serves no chat endpoint.
//
// Tools: a Jinja template that reads `tools` or `tool_calls` gets the
// request's tools and the raw tool turns, and the model answers in its
// family's format (tool_format). Presets and templates that know nothing
// of tools get them as text (tools/tool_prompt.h) in the Hermes format.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gguf/reader.h"
#include "jinja/template.h"
#include "server/chat_conversation.h"
#include "server/chat_output.h"
#include "server/tools/tool_request.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace tokenmill::server {

// A Jinja chat template with what the server reads off its text, once at
// start-up rather than per request.
struct ChatTemplate {
  explicit ChatTemplate(jinja::Template parsed);

  jinja::Template tmpl;
  // It writes tools and tool turns itself (reads `tools` or `tool_calls`);
  // one that does not gets them folded into text.
  bool handles_tools;
  ToolCallFormat tool_format;      // detect_tool_call_format of its text
  bool tool_format_recognised;     // a format's markers were found (else Hermes is tried)
  ReasoningFormat auto_reasoning;  // what --reasoning-format auto means for it
};

struct ChatFormat {
  // The template in use; null: the preset `kind`.
  std::shared_ptr<const ChatTemplate> jinja;
  // The GGUF's named template "tool_use", used instead when tools are offered.
  std::shared_ptr<const ChatTemplate> tool_use;
  tokenizer::ChatTemplateKind kind = tokenizer::ChatTemplateKind::ChatML;
  std::string bos_text;  // the BOS/EOS tokens' texts ("<s>", "</s>"): bos_token/eos_token of the template
  std::string eos_text;
  std::string source;   // where it came from, for the start-up log and /v1/models
  std::string warning;  // why the GGUF's own template is not used, when it is not

  // "jinja" or the preset's name.
  std::string name() const;
  // The template for this conversation (tool_use when tools are offered and it exists).
  const ChatTemplate* template_for(const ChatConversation& conversation) const;
  // How the reply to this conversation is parsed: think spans per
  // `reasoning` (--reasoning-format; kAuto: when the template writes think
  // tags), and tool calls in the format the template asks for (Hermes
  // when tools reach the model as text). `prompt`: the rendered prompt
  // (whether it opened a think span).
  ChatOutputFormat output_format(const ChatConversation& conversation, std::string_view prompt,
                                 ReasoningFormat reasoning) const;
};

// override_spec: "" (use the GGUF), a preset name, or the path of a file
// holding a Jinja template. Throws Error for an unknown name, an
// unreadable file or a template that does not parse (naming its line and
// column); nullopt when nothing gives a template.
std::optional<ChatFormat> select_chat_format(const std::string& override_spec, const gguf::GgufFile& file,
                                             const tokenizer::Tokenizer* tok);

// How a chat request wants its prompt rendered (vLLM's field names).
struct ChatRenderOptions {
  bool add_generation_prompt = true;
  // The last (assistant) message is left open for the model to continue:
  // the text ends with its content, no end-of-turn and no generation
  // prompt after it.
  bool continue_final_message = false;
  // vLLM's meaning for chat: special tokens added *on top of* the
  // template's own: true puts one more BOS in front (when the model uses one).
  bool add_special_tokens = false;
};

// The prompt text. Throws ApiError: 400 when the template refuses the
// conversation (raise_exception, a bad role order, a runtime error of the
// template) naming the template's line; 500 when the template exceeds the
// sandbox's bounds.
std::string render_chat_text(const ChatFormat& format, const ChatConversation& conversation,
                             const ChatRenderOptions& options);

// Renders and tokenizes: special-token texts become special tokens, and
// the BOS the model asks for is added unless the text already begins with
// it (templates that write {{ bos_token }} do). Throws as render_chat_text.
std::vector<int32_t> chat_prompt_tokens(const ChatFormat& format, const tokenizer::Tokenizer& tok,
                                        const ChatConversation& conversation, const ChatRenderOptions& options);

// The text and its tokens.
struct ChatPrompt {
  std::string text;
  std::vector<int32_t> ids;
};
ChatPrompt chat_prompt(const ChatFormat& format, const tokenizer::Tokenizer& tok, const ChatConversation& conversation,
                       const ChatRenderOptions& options);

// A conversation of plain messages (role, content) and no tools.
ChatConversation plain_conversation(const std::vector<tokenizer::ChatMessage>& messages);

}  // namespace tokenmill::server
