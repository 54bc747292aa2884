// Token counters for exact synthetic prompt lengths (see prompt_builder.h):
// the target server's /tokenize, a local GGUF tokenizer, or words.
#pragma once

#include <string>

#include "bench/prompt_builder.h"
#include "bench/traffic_spec.h"

namespace tokenmill::bench {

// POST {url}/tokenize, first as {"prompt", "add_special_tokens": false,
// "model"} (vLLM, tokenmill), else as {"content", "add_special": false}
// (llama.cpp); reads "count" or the length of "tokens". Throws Error naming
// the url when the server has no usable /tokenize. Serialised by a mutex.
TokenCounter server_token_counter(const std::string& url, const std::string& model);

// The GGUF file's own tokenizer, special tokens (BOS) left out.
TokenCounter gguf_token_counter(const std::string& path);

// The counter the spec asks for (prompts.token_counter).
TokenCounter make_token_counter(const TrafficSpec& spec, const std::string& url);

}  // namespace tokenmill::bench
