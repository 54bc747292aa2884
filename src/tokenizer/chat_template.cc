#include "tokenizer/chat_template.h"

#include <array>
#include <cctype>
#include <utility>

#include "util/error.h"

namespace tokenmill::tokenizer {

namespace {

constexpr std::array<std::pair<std::string_view, ChatTemplateKind>, 7> kNames = {{
    {"gemma", ChatTemplateKind::Gemma},
    {"llama2", ChatTemplateKind::Llama2},
    {"llama3", ChatTemplateKind::Llama3},
    {"chatml", ChatTemplateKind::ChatML},
    {"qwen", ChatTemplateKind::ChatML},
    {"mistral", ChatTemplateKind::Mistral},
    {"phi3", ChatTemplateKind::Phi3},
}};

bool contains(std::string_view haystack, std::string_view needle) {
  return haystack.find(needle) != std::string_view::npos;
}

// Python's str.strip() / Jinja's trim on ASCII whitespace, which is what the
// reference templates apply.
std::string_view trim(std::string_view s) {
  constexpr std::string_view kSpace = " \t\n\r\f\v";
  const size_t first = s.find_first_not_of(kSpace);
  if (first == std::string_view::npos) return {};
  return s.substr(first, s.find_last_not_of(kSpace) - first + 1);
}

void check_roles(std::span<const ChatMessage> messages) {
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string& role = messages[i].role;
    if (role != "system" && role != "user" && role != "assistant") {
      fail("chat message #{} has unknown role '{}' (expected system, user or assistant)", i, role);
    }
  }
}

// The shape Gemma, Llama 2 and Mistral require: an optional leading system
// message, then user/assistant alternating, starting with user.
struct Alternating {
  std::optional<std::string_view> system;
  std::span<const ChatMessage> turns;
};

Alternating split_alternating(ChatTemplateKind kind, std::span<const ChatMessage> messages) {
  Alternating out;
  out.turns = messages;
  if (!messages.empty() && messages[0].role == "system") {
    out.system = messages[0].content;
    out.turns = messages.subspan(1);
    if (out.turns.empty()) {
      fail(
          "the {} chat template folds the system message into the first user message, "
          "but no user message follows it",
          chat_template_name(kind));
    }
  }
  const size_t offset = out.system ? 1 : 0;
  for (size_t i = 0; i < out.turns.size(); ++i) {
    const std::string_view want = i % 2 == 0 ? "user" : "assistant";
    if (out.turns[i].role != want) {
      fail(
          "chat message #{} has role '{}' but the {} chat template needs '{}' there: after an "
          "optional first system message, roles must alternate user/assistant/user/...",
          i + offset, out.turns[i].role, chat_template_name(kind), want);
    }
  }
  return out;
}

std::string render_gemma(std::span<const ChatMessage> messages, bool add_generation_prompt) {
  const Alternating conv = split_alternating(ChatTemplateKind::Gemma, messages);
  std::string out;
  for (size_t i = 0; i < conv.turns.size(); ++i) {
    const ChatMessage& m = conv.turns[i];
    out += "<start_of_turn>";
    out += m.role == "assistant" ? "model" : "user";
    out += '\n';
    if (i == 0 && conv.system) {
      out += *conv.system;
      out += "\n\n";
    }
    out += trim(m.content);
    out += "<end_of_turn>\n";
  }
  if (add_generation_prompt) out += "<start_of_turn>model\n";
  return out;
}

std::string render_llama3(std::span<const ChatMessage> messages, bool add_generation_prompt) {
  std::string out;
  for (const ChatMessage& m : messages) {
    out += "<|start_header_id|>";
    out += m.role;
    out += "<|end_header_id|>\n\n";
    out += trim(m.content);
    out += "<|eot_id|>";
  }
  if (add_generation_prompt) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
  return out;
}

std::string render_chatml(std::span<const ChatMessage> messages, bool add_generation_prompt) {
  std::string out;
  for (const ChatMessage& m : messages) {
    out += "<|im_start|>";
    out += m.role;
    out += '\n';
    out += m.content;
    out += "<|im_end|>\n";
  }
  if (add_generation_prompt) out += "<|im_start|>assistant\n";
  return out;
}

// As the reference template, strip() runs over the user content with the
// <<SYS>> block already prepended, so only the user text's tail is trimmed.
std::string render_llama2(std::span<const ChatMessage> messages, std::string_view bos_text) {
  const Alternating conv = split_alternating(ChatTemplateKind::Llama2, messages);
  std::string out;
  for (size_t i = 0; i < conv.turns.size(); ++i) {
    const ChatMessage& m = conv.turns[i];
    if (m.role == "assistant") {
      out += ' ';
      out += trim(m.content);
      out += " </s>";
      continue;
    }
    std::string content;
    if (i == 0 && conv.system) {
      content = "<<SYS>>\n";
      content += *conv.system;
      content += "\n<</SYS>>\n\n";
    }
    content += m.content;
    if (i > 0) out += bos_text;  // the leading BOS is the tokenizer's
    out += "[INST] ";
    out += trim(content);
    out += " [/INST]";
  }
  return out;
}

std::string render_mistral(std::span<const ChatMessage> messages) {
  const Alternating conv = split_alternating(ChatTemplateKind::Mistral, messages);
  std::string out;
  for (size_t i = 0; i < conv.turns.size(); ++i) {
    const ChatMessage& m = conv.turns[i];
    if (m.role == "assistant") {
      out += m.content;
      out += "</s>";
      continue;
    }
    out += "[INST] ";
    if (i == 0 && conv.system) {
      out += *conv.system;
      out += "\n\n";
    }
    out += m.content;
    out += " [/INST]";
  }
  return out;
}

std::string render_phi3(std::span<const ChatMessage> messages, bool add_generation_prompt) {
  std::string out;
  for (const ChatMessage& m : messages) {
    out += "<|";
    out += m.role;
    out += "|>\n";
    out += m.content;
    out += "<|end|>\n";
  }
  if (add_generation_prompt) out += "<|assistant|>\n";
  return out;
}

}  // namespace

std::optional<ChatTemplateKind> detect_chat_template(std::string_view src) {
  if (contains(src, "<start_of_turn>")) return ChatTemplateKind::Gemma;
  if (contains(src, "<|start_header_id|>")) return ChatTemplateKind::Llama3;
  if (contains(src, "<|im_start|>")) return ChatTemplateKind::ChatML;
  if (contains(src, "<|user|>") && contains(src, "<|end|>")) return ChatTemplateKind::Phi3;
  if (contains(src, "[INST]")) {
    return contains(src, "<<SYS>>") ? ChatTemplateKind::Llama2 : ChatTemplateKind::Mistral;
  }
  return std::nullopt;
}

ChatTemplateKind chat_template_from_name(std::string_view name) {
  std::string lower(name);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (const auto& [known, kind] : kNames) {
    if (lower == known) return kind;
  }
  fail(
      "unknown chat template '{}' (expected one of gemma, llama2, llama3, chatml, qwen, mistral, "
      "phi3)",
      name);
}

std::string_view chat_template_name(ChatTemplateKind kind) {
  switch (kind) {
    case ChatTemplateKind::Gemma: return "gemma";
    case ChatTemplateKind::Llama2: return "llama2";
    case ChatTemplateKind::Llama3: return "llama3";
    case ChatTemplateKind::ChatML: return "chatml";
    case ChatTemplateKind::Mistral: return "mistral";
    case ChatTemplateKind::Phi3: return "phi3";
  }
  return "unknown";
}

std::string render_chat(ChatTemplateKind kind, std::span<const ChatMessage> messages, bool add_generation_prompt,
                        std::string_view bos_text) {
  check_roles(messages);
  switch (kind) {
    case ChatTemplateKind::Gemma: return render_gemma(messages, add_generation_prompt);
    case ChatTemplateKind::Llama2: return render_llama2(messages, bos_text);
    case ChatTemplateKind::Llama3: return render_llama3(messages, add_generation_prompt);
    case ChatTemplateKind::ChatML: return render_chatml(messages, add_generation_prompt);
    case ChatTemplateKind::Mistral: return render_mistral(messages);
    case ChatTemplateKind::Phi3: return render_phi3(messages, add_generation_prompt);
  }
  fail("unknown chat template kind {}", static_cast<int>(kind));
}

// The conversation before the last message, rendered with the opening of
// an assistant turn, is exactly what precedes that message's content in a
// full render; the content follows as the family writes it.
std::string render_chat_continuation(ChatTemplateKind kind, std::span<const ChatMessage> messages,
                                     std::string_view bos_text) {
  if (messages.empty() || messages.back().role != "assistant") {
    fail("continuing the final message needs a last message with role 'assistant', got '{}'",
         messages.empty() ? std::string("nothing") : messages.back().role);
  }
  render_chat(kind, messages, /*add_generation_prompt=*/false, bos_text);  // the whole order's checks
  const std::span<const ChatMessage> before = messages.first(messages.size() - 1);
  const std::string& content = messages.back().content;
  switch (kind) {
    case ChatTemplateKind::Gemma: return render_gemma(before, true) + std::string(trim(content));
    case ChatTemplateKind::Llama2: return render_llama2(before, bos_text) + " " + std::string(trim(content));
    case ChatTemplateKind::Llama3: return render_llama3(before, true) + std::string(trim(content));
    case ChatTemplateKind::ChatML: return render_chatml(before, true) + content;
    case ChatTemplateKind::Mistral: return render_mistral(before) + content;
    case ChatTemplateKind::Phi3: return render_phi3(before, true) + content;
  }
  fail("unknown chat template kind {}", static_cast<int>(kind));
}

}  // namespace tokenmill::tokenizer
