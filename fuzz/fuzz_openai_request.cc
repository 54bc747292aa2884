// libFuzzer target for the OpenAI request parsers (src/server/openai/openai_request.h).
// The first byte picks the endpoint, the rest is the body. Any input must
// parse or throw ApiError with a 400 status and a message; anything else
// escaping (a JSON library exception, a crash, UB) is a bug. A parsed
// request must satisfy the invariants the handlers rely on.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "server/api_error.h"
#include "server/openai/openai_request.h"
#include "server/tools/tool_prompt.h"

namespace {

using namespace tokenmill::server;

constexpr ParseLimits kLimits{/*n_vocab=*/512, /*json=*/{}};

void require(bool ok) {
  if (!ok) std::abort();
}

void check_tokens(const std::vector<int32_t>& ids) {
  for (int32_t id : ids) require(id >= 0 && id < kLimits.n_vocab);
}

void check_common(const SamplingRequest& c) {
  require(c.n >= 1 && c.n <= kMaxChoices);
  require(c.sampling.temperature >= 0.0f && c.sampling.temperature <= kMaxTemperature);
  require(c.sampling.top_p > 0.0f && c.sampling.top_p <= 1.0f);
  require(c.top_logprobs >= 0 && c.top_logprobs <= tokenmill::engine::kMaxTopLogprobs);
  for (const auto& [id, bias] : c.sampling.logit_bias) require(id >= 0 && id < kLimits.n_vocab);
  for (const std::string& s : c.sampling.stop) require(!s.empty());
  require(!c.include_usage || c.stream);
  // The extension fields hold what SamplingParams::validate accepts, so the
  // engine never refuses a parsed request for them.
  require(c.sampling.min_tokens >= 0 && c.sampling.typical_p > 0.0f && c.sampling.typical_p <= 1.0f);
  require(!c.max_tokens || c.sampling.min_tokens <= *c.max_tokens);
  check_tokens(c.sampling.stop_token_ids);
  check_tokens(c.sampling.allowed_token_ids);
  require(c.prompt_logprobs >= -1 && c.prompt_logprobs <= tokenmill::engine::kMaxTopLogprobs);
  require(c.prompt_logprobs < 0 || !c.stream);
  require(!c.truncate_prompt_tokens || *c.truncate_prompt_tokens == -1 || *c.truncate_prompt_tokens >= 1);
  for (const std::string& w : c.bad_words) require(!w.empty());
}

void parse(uint8_t endpoint, std::string_view body) {
  switch (endpoint % 4) {
    case 0: {
      const CompletionRequest r = parse_completion_request(body, kLimits);
      check_common(r.common);
      require(!r.prompts.empty());
      for (const PromptInput& p : r.prompts) {
        require(p.is_text ? !p.text.empty() : !p.tokens.empty());
        check_tokens(p.tokens);
      }
      require(!r.common.max_tokens || *r.common.max_tokens >= (r.echo || r.common.prompt_logprobs >= 0 ? 0 : 1));
      break;
    }
    case 1: {
      const ChatRequest r = parse_chat_request(body, kLimits);
      check_common(r.common);
      const std::vector<ApiMessage>& messages = r.conversation.messages;
      require(!messages.empty());
      for (const auto& m : messages)
        require(m.role == "system" || m.role == "user" || m.role == "assistant" || m.role == "tool");
      // What a template without tools renders: tool turns folded into the three roles.
      for (const auto& m : template_messages(messages, r.conversation.tool_request))
        require(m.role == "system" || m.role == "user" || m.role == "assistant");
      require(r.conversation.tools.is_null() == !r.conversation.tool_request.active());
      require(!r.continue_final_message || (!r.add_generation_prompt && messages.back().role == "assistant"));
      break;
    }
    case 2: parse_tokenize_request(body, kLimits); break;
    default: check_tokens(parse_detokenize_request(body, kLimits).tokens); break;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view body(reinterpret_cast<const char*>(data + 1), size - 1);
  try {
    parse(data[0], body);
  } catch (const ApiError& e) {
    require(e.status() == 400 && e.what()[0] != '\0');
    (void)e.to_json().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
  return 0;
}
