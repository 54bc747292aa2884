#include "server/model_profile.h"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

namespace tokenmill::server {
namespace {

constexpr std::string_view kInstructionWords[] = {"it", "instruct", "chat", "sft", "rlhf", "dpo", "orpo"};
constexpr std::string_view kPretrainedWords[] = {"base", "pt", "pretrained"};

// Lower-case words of a metadata string, split at anything not a letter or
// digit ("gemma-3-270m-it" -> gemma, 3, 270m, it).
std::vector<std::string> metadata_words(std::string_view text) {
  std::vector<std::string> words;
  std::string word;
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (std::isalnum(c)) {
      word.push_back(static_cast<char>(std::tolower(c)));
    } else if (!word.empty()) {
      words.push_back(std::move(word));
      word.clear();
    }
  }
  if (!word.empty()) words.push_back(std::move(word));
  return words;
}

// The first word of `words` found in `text`'s words, or "".
template <size_t N>
std::string find_metadata_word(std::string_view text, const std::string_view (&words)[N]) {
  for (const std::string& w : metadata_words(text))
    if (std::find(std::begin(words), std::end(words), w) != std::end(words)) return w;
  return "";
}

std::string gguf_string_field(const gguf::GgufFile& file, std::string_view key) {
  const gguf::Value* v = file.find(key);
  return v && v->is_string() ? v->as_string() : std::string();
}

}  // namespace

ModelMetadata read_model_metadata(const gguf::GgufFile& file) {
  ModelMetadata m;
  m.name = gguf_string_field(file, "general.name");
  m.basename = gguf_string_field(file, "general.basename");
  m.finetune = gguf_string_field(file, "general.finetune");
  m.has_chat_template = !gguf_string_field(file, "tokenizer.chat_template").empty();
  return m;
}

ModelProfile profile_model(const ModelMetadata& meta, const std::optional<ChatFormat>& chat) {
  ModelProfile p;
  p.gguf_chat_template = meta.has_chat_template;
  if (chat) {
    p.chat_template = chat->name();
    p.chat_template_source = chat->source;
    p.chat_template_warning = chat->warning;
  }
  const std::pair<const char*, const std::string*> fields[] = {
      {"general.finetune", &meta.finetune}, {"general.name", &meta.name}, {"general.basename", &meta.basename}};
  for (const auto& [key, value] : fields) {
    if (const std::string w = find_metadata_word(*value, kInstructionWords); !w.empty()) {
      p.base_model = false;
      p.base_model_reason = fmt::format("{} '{}' names instruction tuning ('{}')", key, *value, w);
      return p;
    }
  }
  for (const auto& [key, value] : fields) {
    if (const std::string w = find_metadata_word(*value, kPretrainedWords); !w.empty()) {
      p.base_model = true;
      p.base_model_reason = fmt::format("{} '{}' names a pretrained model ('{}')", key, *value, w);
      return p;
    }
  }
  p.base_model = !meta.has_chat_template;
  p.base_model_reason = meta.has_chat_template
                            ? "the GGUF carries a chat template and its name says nothing else"
                            : "the GGUF has no chat template and its name names no instruction tuning";
  return p;
}

std::vector<std::string> model_notices(const ModelProfile& p) {
  std::vector<std::string> out;
  if (p.base_model) {
    out.push_back(fmt::format(
        "the model looks like a pretrained base model, not an instruction-tuned one ({}): chat requests work, but "
        "replies continue the conversation text rather than follow instructions, and may not end their turn",
        p.base_model_reason));
  }
  const std::string own = !p.gguf_chat_template              ? "the GGUF has no chat template"
                          : !p.chat_template_warning.empty() ? p.chat_template_warning
                                                             : "the GGUF's chat template cannot be used";
  if (p.chat_template.empty()) {
    out.push_back(own +
                  " and the vocabulary has no turn-marker tokens: /v1/chat/completions is refused; pass "
                  "--chat-template NAME to serve chat");
  } else if (p.chat_template_source.find("vocabulary") != std::string::npos || !p.gguf_chat_template ||
             !p.chat_template_warning.empty()) {
    // A fallback, or a --chat-template standing in for a template the model
    // lacks; an override of a template the GGUF has is the user's choice.
    out.push_back(
        fmt::format("{}: chat requests use the {} template ({})", own, p.chat_template, p.chat_template_source));
  }
  return out;
}

}  // namespace tokenmill::server
