// What a served model is, as far as its GGUF metadata tells: whether it
// looks like a pretrained base model rather than an instruction-tuned one,
// and which chat template chat requests go through and where it came from.
// Logged at `serve` start-up and reported in GET /v1/models, because a base
// model behind the chat endpoint answers mechanically but does not follow
// instructions or end its turn, and that surprises a client far less when
// it was told.
//
// The rule (docs/api.md, "Model notices"): the words of general.finetune,
// general.name and general.basename decide first, an instruction-tuning word
// (it, instruct, chat, sft, rlhf, dpo, orpo) meaning "not base" and a
// pretraining word (base, pt, pretrained) meaning "base", instruction words
// winning when both appear. With no such word, a model whose GGUF carries
// no tokenizer.chat_template is taken as a base model: instruction-tuned
// releases ship their chat template and converters copy it into the GGUF.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/reader.h"
#include "server/chat_prompt.h"

namespace tokenmill::server {

struct ModelProfile {
  bool base_model = false;
  std::string base_model_reason;      // the evidence, in words (for the log)
  bool gguf_chat_template = false;    // the GGUF carries tokenizer.chat_template
  std::string chat_template;          // the family used ("gemma", ...); "" when chat is not served
  std::string chat_template_source;   // ChatFormat::source; "" when chat is not served
  std::string chat_template_warning;  // ChatFormat::warning: why the GGUF's own template is not used
};

// The metadata the rule reads, apart from the file so it can be tested alone.
struct ModelMetadata {
  std::string name;      // general.name
  std::string basename;  // general.basename
  std::string finetune;  // general.finetune
  bool has_chat_template = false;
};

ModelMetadata read_model_metadata(const gguf::GgufFile& file);
ModelProfile profile_model(const ModelMetadata& meta, const std::optional<ChatFormat>& chat);

// Start-up notices, one sentence each: a base model, a chat template that is
// not the model's own (a fallback), no chat template at all. Empty for an
// instruction-tuned model with its own template.
std::vector<std::string> model_notices(const ModelProfile& profile);

}  // namespace tokenmill::server
