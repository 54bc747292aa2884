// Which chat template a served model uses, and chat messages -> prompt
// token ids. The template is chosen once at start-up: --chat-template NAME
// or FILE (a Jinja file, recognised by its markers), else the GGUF's
// tokenizer.chat_template, else the turn-marker tokens of the vocabulary
// (<start_of_turn>, <|im_start|>, ...); a model with none of these serves
// no chat endpoint.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "gguf/reader.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace tokenmill::server {

struct ChatFormat {
  tokenizer::ChatTemplateKind kind = tokenizer::ChatTemplateKind::ChatML;
  std::string bos_text;  // the BOS token's text ("<s>"), for Llama 2's later turns
  std::string source;    // where it came from, for the start-up log
};

// override_spec: "" (use the GGUF), a template name, or the path of a file
// holding a Jinja template. Throws Error for an unknown name or a file
// whose template is not recognised; nullopt when nothing gives one.
std::optional<ChatFormat> select_chat_format(const std::string& override_spec, const gguf::GgufFile& file,
                                             const tokenizer::Tokenizer* tok);

// Renders and tokenizes (BOS as the model asks; special-token texts of the
// template parsed as special tokens). Throws Error for a conversation the
// template refuses (bad role order).
std::vector<int32_t> chat_prompt_tokens(const ChatFormat& format, const tokenizer::Tokenizer& tok,
                                        std::span<const tokenizer::ChatMessage> messages, bool add_generation_prompt);

// How a chat request wants its prompt rendered (vLLM's field names).
struct ChatRenderOptions {
  bool add_generation_prompt = true;
  // The last (assistant) message is left open for the model to continue
  // (tokenizer::render_chat_continuation); no generation prompt then.
  bool continue_final_message = false;
  // vLLM's meaning for chat: special tokens added *on top of* the
  // template's own. The built-in templates leave their BOS to the
  // tokenizer, so false (the default) gives the template's prompt and true
  // one more BOS in front of it (when the model uses one).
  bool add_special_tokens = false;
};
std::vector<int32_t> chat_prompt_tokens(const ChatFormat& format, const tokenizer::Tokenizer& tok,
                                        std::span<const tokenizer::ChatMessage> messages,
                                        const ChatRenderOptions& options);

}  // namespace tokenmill::server
