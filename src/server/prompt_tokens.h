// The token-level side of the extension fields, once a prompt is tokens:
// vLLM's bad_words as banned token sequences, vLLM's
// truncate_prompt_tokens and llama.cpp's n_keep as prompt truncation.
// Pure functions (the tokenizer is only read), unit-tested without a model.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "server/sampling_request.h"
#include "tokenizer/tokenizer.h"

namespace tokenmill::server {

// Each word's token sequence as it would follow other text (no BOS), once
// without and once with a leading space (as vLLM: so that a word is banned
// at the start of the text and after a space). The spaced spelling is kept
// only when it is a different word token of the same length (not a lone
// space token in front of the first spelling). Duplicates dropped.
std::vector<std::vector<int32_t>> bad_words_token_ids(const tokenizer::Tokenizer& tok,
                                                      std::span<const std::string> words);

// What the context leaves for a prompt (SamplingRequest::truncate_prompt_tokens
// and n_keep): max_model_len 0 means unknown (no truncation by n_keep).
struct PromptRoom {
  int64_t max_model_len = 0;
  // The completion tokens the prompt must leave room for; nullopt when the
  // request gives none (chat without max_tokens, n_predict -1): a prompt
  // that fills the context then keeps half of it, as llama.cpp's server.
  std::optional<int64_t> max_tokens;
};

// Applies truncate_prompt_tokens (keep the last k tokens; -1: the last
// max_model_len), then n_keep: a prompt whose tokens do not fit keeps its
// first n_keep tokens and its last ones, dropping from the middle so that
// it fits. Without n_keep (or -1) a prompt that does not fit is left for
// the engine to refuse (context_length_exceeded). Throws ApiError 400
// naming n_keep when n_keep alone leaves no room.
void fit_prompt(std::vector<int32_t>& prompt, const SamplingRequest& r, const PromptRoom& room);

// What every generation handler does with the extension fields once its
// prompts are tokens: fit_prompt on each, and r.bad_words tokenized into
// r.sampling.bad_words_ids (400 naming bad_words when `tok` is null).
// The handler itself still chooses the tokenization (add_special_tokens),
// answers prompt_logprobs and resolves max_tokens_to_context.
void apply_prompt_fields(std::vector<std::vector<int32_t>>& prompts, SamplingRequest& r, const PromptRoom& room,
                         const tokenizer::Tokenizer* tok);

}  // namespace tokenmill::server
