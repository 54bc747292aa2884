// OpenAI request bodies -> validated plain structs, before any model work:
// POST /v1/completions, /v1/chat/completions, /tokenize, /detokenize.
// Pure functions of the body and a few limits, so they are unit-tested and
// fuzzed without a model (fuzz/fuzz_openai_request.cc).
//
// Every problem throws ApiError 400 with `param` naming the field: malformed
// JSON, wrong types, out-of-range values, unknown fields (OpenAI's own API
// refuses them too; a typo such as "max_token" must not be ignored: the
// error suggests the nearest known field), features the server does not
// support ("'X' is not supported": suffix, non-text content, beam search).
// The common extensions of vLLM, llama.cpp and OpenAI's newer fields are
// accepted with their meaning (request_extensions.h).
// Output constraints (response_format and the vLLM / llama.cpp extensions)
// and tools are parsed here too; compiling them into a grammar needs the
// vocabulary and happens in the handler (structured_output.h).
// Checks that need the tokenized prompt (context length) happen later, in
// the engine's check_request.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "server/chat_conversation.h"
#include "server/json_fields.h"
#include "server/sampling_request.h"
#include "server/tools/tool_request.h"
#include "tokenizer/chat_template.h"

namespace tokenmill::server {

struct CompletionRequest {
  SamplingRequest common;
  std::vector<PromptInput> prompts;  // >= 1
  bool echo = false;
};

struct ChatRequest {
  SamplingRequest common;
  // The messages (>= 1), tools (conversation.tool_request: never active
  // together with common.constraint), chat_template_kwargs and
  // reasoning_effort, rendered by the chat prompt (chat_prompt.h).
  ChatConversation conversation;
  bool add_generation_prompt = true;    // extension (vLLM's name; also chat_template_kwargs.add_generation_prompt)
  bool continue_final_message = false;  // extension (vLLM's): the last assistant message is continued
};

// Two shapes: tokenmill's {"prompt" | "messages", "add_special_tokens"}
// and llama.cpp's {"content", "add_special" (default false),
// "parse_special" (default true)}, which is answered in llama.cpp's shape.
struct TokenizeRequest {
  std::string model;
  bool is_chat = false;
  bool llama_shape = false;       // the text came as "content"
  std::string prompt;             // !is_chat ("prompt" or "content")
  ChatConversation conversation;  // is_chat; rendered as a chat request's
  bool add_special_tokens = true;
  bool parse_special = false;  // special-token texts become those tokens
  bool add_generation_prompt = true;
  bool with_pieces = false;  // also return each token's text
};

struct DetokenizeRequest {
  std::string model;
  std::vector<int32_t> tokens;
};

CompletionRequest parse_completion_request(std::string_view body, const ParseLimits& limits);
ChatRequest parse_chat_request(std::string_view body, const ParseLimits& limits);
TokenizeRequest parse_tokenize_request(std::string_view body, const ParseLimits& limits);
DetokenizeRequest parse_detokenize_request(std::string_view body, const ParseLimits& limits);

}  // namespace tokenmill::server
