// libFuzzer target for the chat template renderer (src/tokenizer/
// chat_template.h): detection from a GGUF's Jinja template text (or lookup
// by name), then rendering a conversation.
//
// Input: a flag byte (bit 0: add_generation_prompt; bit 1: the template
// text is a template name for chat_template_from_name), then sections split
// at '\0': the template text, the BOS text, and one section per message,
// "role\ncontent" (no '\n': all role, empty content).
//
// Contract: tokenmill::Error is the only clean rejection (an unknown name,
// an unknown role, a broken user/assistant alternation). Detection must
// never throw and its kind's name must map back to it. A rendered prompt
// must: be empty or begin with the family's opening marker; contain every
// message's content with ASCII whitespace trimmed; end with the assistant
// opening when one was asked for (families that have one); and only come
// from messages with the three known roles.
// Anything else aborts.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/chat_template.h"
#include "util/error.h"

namespace {

using namespace tokenmill::tokenizer;

void require(bool ok) {
  if (!ok) std::abort();  // a rendering that succeeded but breaks the contract
}

std::vector<std::string_view> split_sections(std::string_view s) {
  std::vector<std::string_view> out;
  for (size_t begin = 0;;) {
    const size_t end = std::min(s.find('\0', begin), s.size());
    out.push_back(s.substr(begin, end - begin));
    if (end == s.size()) return out;
    begin = end + 1;
  }
}

std::string_view trim_ascii(std::string_view s) {
  constexpr std::string_view kSpace = " \t\n\r\f\v";
  const size_t first = s.find_first_not_of(kSpace);
  if (first == std::string_view::npos) return {};
  return s.substr(first, s.find_last_not_of(kSpace) - first + 1);
}

// What every non-empty prompt of the family starts with, and what ends it
// when a generation prompt is asked for ("" where the family has none).
struct Markers {
  std::string_view opening;
  std::string_view generation;
};

Markers markers(ChatTemplateKind kind) {
  switch (kind) {
    case ChatTemplateKind::Gemma: return {"<start_of_turn>", "<start_of_turn>model\n"};
    case ChatTemplateKind::Llama3: return {"<|start_header_id|>", "<|start_header_id|>assistant<|end_header_id|>\n\n"};
    case ChatTemplateKind::ChatML: return {"<|im_start|>", "<|im_start|>assistant\n"};
    case ChatTemplateKind::Phi3: return {"<|", "<|assistant|>\n"};
    case ChatTemplateKind::Llama2:
    case ChatTemplateKind::Mistral: return {"[INST] ", ""};
  }
  std::abort();  // a kind this target does not know yet: extend the table
}

void check_rendered(ChatTemplateKind kind, const std::vector<ChatMessage>& messages, bool gen, const std::string& out) {
  for (const ChatMessage& m : messages) {
    require(m.role == "system" || m.role == "user" || m.role == "assistant");
    require(out.find(trim_ascii(m.content)) != std::string::npos);
  }
  const Markers mk = markers(kind);
  require(out.empty() || out.starts_with(mk.opening));
  if (gen) require(out.ends_with(mk.generation));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t flags = data[0];
  const std::vector<std::string_view> sections =
      split_sections(std::string_view(reinterpret_cast<const char*>(data + 1), size - 1));
  const std::string_view source = sections[0];
  const std::string_view bos_text = sections.size() > 1 ? sections[1] : std::string_view();
  std::vector<ChatMessage> messages;
  for (size_t i = 2; i < sections.size(); ++i) {
    const size_t nl = std::min(sections[i].find('\n'), sections[i].size());
    messages.push_back({std::string(sections[i].substr(0, nl)),
                        std::string(sections[i].substr(std::min(nl + 1, sections[i].size())))});
  }
  try {
    std::optional<ChatTemplateKind> kind;
    if (flags & 2) {
      kind = chat_template_from_name(source);
    } else {
      kind = detect_chat_template(source);
    }
    if (!kind) return 0;
    require(chat_template_from_name(chat_template_name(*kind)) == *kind);
    const bool gen = flags & 1;
    const std::string out = render_chat(*kind, messages, gen, bos_text);
    check_rendered(*kind, messages, gen, out);
  } catch (const tokenmill::Error&) {
  }
  return 0;
}
