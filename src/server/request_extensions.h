// The extension fields of POST /v1/completions and /v1/chat/completions
// that clients of other servers send: vLLM's (min_tokens, stop_token_ids,
// bad_words, prompt_logprobs, ...), llama.cpp's names for the same knobs
// (n_predict, n_probs, repeat_penalty, typical_p, n_keep, samplers, ...)
// and OpenAI's newer fields (reasoning_effort, modalities, prediction).
// Each is accepted with its meaning, or refused with "'X' is not
// supported" where it would change results in a way tokenmill cannot
// honour (use_beam_search true, mirostat 1/2, a sampler order of its own).
// Hints that change nothing here (cache_prompt, id_slot, ...) are
// accepted and ignored. docs/api.md lists them all.
//
// Pure functions of the body, like openai_request.h; errors are ApiError
// 400 naming the field.
#pragma once

#include <cstdint>
#include <set>
#include <string>

#include "server/json_fields.h"
#include "server/sampling_request.h"

namespace tokenmill::server {

struct ChatRequest;  // openai/openai_request.h

// Names of the extension fields both generation endpoints accept.
const std::set<std::string, std::less<>>& extension_fields();
// Names of the chat-only ones (chat_template_kwargs, continue_final_message).
const std::set<std::string, std::less<>>& chat_extension_fields();

// Reads the shared extensions into r. Call after the standard fields:
// an alias given together with its standard field must agree with it.
void parse_extensions(const JsonFields& f, const ParseLimits& limits, SamplingRequest& r);

// llama.cpp's n_predict, another name for max_tokens: sets r.max_tokens
// (at least `lo`), or r.max_tokens_to_context for -1. 400 when max_tokens
// (or max_completion_tokens) is given too and differs. Call after those.
void parse_n_predict(const JsonFields& f, int64_t lo, SamplingRequest& r);

// llama.cpp's n_probs: > 0 turns on logprobs with that many alternatives.
// 400 when the endpoint's own field (`top_param`: "logprobs" for
// completions, "top_logprobs" for chat) asks for another number.
void parse_n_probs(const JsonFields& f, const char* top_param, SamplingRequest& r);

// min_tokens may not exceed max_tokens (400 naming min_tokens).
void check_min_tokens(const SamplingRequest& r, int64_t max_tokens);

// chat_template_kwargs (add_generation_prompt, and every other key as a
// template variable), reasoning_effort (a template variable too) and
// continue_final_message. Call after
// r.add_generation_prompt is read.
void parse_chat_extensions(const JsonFields& f, ChatRequest& r);

}  // namespace tokenmill::server
