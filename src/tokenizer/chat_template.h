// Chat templates: OpenAI-style messages -> the prompt text a chat model was
// trained on. Instead of a Jinja interpreter, the handful of formats that the
// supported models use are written out by hand; detect_chat_template() picks
// one from the GGUF's `tokenizer.chat_template` by its marker tokens.
//
// BOS: the rendered text never starts with the BOS token. The tokenizer adds
// BOS itself when the model asks for it (add_bos), so including it here would
// double it. Only formats that repeat BOS *inside* the conversation (Llama 2
// opens every later [INST] with it) use `bos_text`, the BOS token's text as
// the vocabulary spells it (e.g. "<s>"). Special-token texts such as
// "<start_of_turn>" or "</s>" in the output must be tokenized as special
// tokens (parse_special), not as plain text.
//
// Roles: "system", "user", "assistant"; anything else throws tokenmill::Error.
// Gemma, Llama 2 and Mistral allow a system message only first and then need
// user/assistant alternation starting with user (as their reference templates
// raise); ChatML, Llama 3 and Phi-3 accept any order.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace tokenmill::tokenizer {

struct ChatMessage {
  std::string role;
  std::string content;
};

enum class ChatTemplateKind { Gemma, Llama2, Llama3, ChatML, Mistral, Phi3 };

// Recognises a Jinja chat template by its markers: "<start_of_turn>" Gemma,
// "<|start_header_id|>" Llama 3, "<|im_start|>" ChatML (Qwen), "<|user|>" with
// "<|end|>" Phi-3, "[INST]" with "<<SYS>>" Llama 2, "[INST]" alone Mistral.
// nullopt when none matches.
std::optional<ChatTemplateKind> detect_chat_template(std::string_view jinja_source);

// "gemma", "llama2", "llama3", "chatml", "qwen" (= chatml), "mistral", "phi3",
// case-insensitive. Throws tokenmill::Error listing the valid names otherwise.
ChatTemplateKind chat_template_from_name(std::string_view name);

// The canonical name of a kind ("gemma", "llama2", ...).
std::string_view chat_template_name(ChatTemplateKind kind);

// Renders the conversation. With add_generation_prompt the text ends with the
// opening of an assistant turn, so that the model continues as the assistant;
// Llama 2 and Mistral need none (a user turn already ends with "[/INST]"), so
// the flag changes nothing for them. Per family:
//   Gemma:   "<start_of_turn>user\n{system}\n\n{user}<end_of_turn>\n"
//            "<start_of_turn>model\n{assistant}<end_of_turn>\n"; prompt
//            "<start_of_turn>model\n"; contents trimmed, system folded into
//            the first user turn.
//   Llama 3: "<|start_header_id|>{role}<|end_header_id|>\n\n{content}<|eot_id|>";
//            prompt "<|start_header_id|>assistant<|end_header_id|>\n\n";
//            contents trimmed.
//   ChatML:  "<|im_start|>{role}\n{content}<|im_end|>\n"; prompt
//            "<|im_start|>assistant\n" (no default system message is added).
//   Llama 2: "[INST] <<SYS>>\n{system}\n<</SYS>>\n\n{user} [/INST] {assistant} </s>"
//            "{bos_text}[INST] {user} [/INST]"...; user and assistant trimmed.
//   Mistral: "[INST] {system}\n\n{user} [/INST]{assistant}</s>[INST] {user} [/INST]".
//   Phi-3:   "<|{role}|>\n{content}<|end|>\n"; prompt "<|assistant|>\n".
// Throws tokenmill::Error on an unknown role or a broken alternation.
std::string render_chat(ChatTemplateKind kind, std::span<const ChatMessage> messages, bool add_generation_prompt,
                        std::string_view bos_text);

// Renders the conversation so that the model goes on writing its last
// message, which must be the assistant's (vLLM's continue_final_message):
// the text ends with that message's content (trimmed where render_chat
// trims it), its turn left open: no end-of-turn marker, no generation
// prompt after it. Throws tokenmill::Error as render_chat does, or when the
// last message is not the assistant's.
std::string render_chat_continuation(ChatTemplateKind kind, std::span<const ChatMessage> messages,
                                     std::string_view bos_text);

}  // namespace tokenmill::tokenizer
