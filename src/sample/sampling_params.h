// The knobs of one request's token sampling, as the OpenAI API and llama.cpp
// expose them. Plain data: copied into the Sampler, checked once by validate()
// at the request boundary.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace tokenmill::sample {

// Sane bounds for validate(); anything outside is almost certainly a client bug.
inline constexpr float kMaxTemperature = 100.0f;
inline constexpr float kMaxRepetitionPenalty = 10.0f;
inline constexpr float kMaxAbsFrequencyPenalty = 2.0f;  // OpenAI: [-2, 2]
inline constexpr float kMaxAbsPresencePenalty = 2.0f;   // OpenAI: [-2, 2]
inline constexpr size_t kMaxStopStrings = 16;
inline constexpr size_t kMaxStopTokenIds = 256;
inline constexpr size_t kMaxBadWordSequences = 512;  // both spellings of up to 256 words

struct SamplingParams {
  float temperature = 1.0f;  // 0 = greedy (argmax after bias and penalties)
  int top_k = 0;             // 0 = off
  float top_p = 1.0f;        // nucleus mass in (0, 1]; 1 = off
  float min_p = 0.0f;        // keep tokens with p >= min_p * p_max; 0 = off
  // Locally typical sampling: keep the tokens whose surprise -log p is
  // closest to the distribution's entropy until their mass reaches it.
  float typical_p = 1.0f;  // in (0, 1]; 1 = off

  // CTRL / llama.cpp style: over the distinct tokens of the penalty window,
  // positive logits are divided by it and non-positive ones multiplied.
  float repetition_penalty = 1.0f;  // 1 = off
  int penalty_last_n = 64;          // window of the history; -1 = whole history, 0 = off
  // OpenAI style: logit -= count * frequency_penalty + (count > 0) * presence_penalty,
  // count being the occurrences of the token in the same window.
  float frequency_penalty = 0.0f;
  float presence_penalty = 0.0f;

  // Added to the raw logits before anything else; -inf bans a token.
  std::vector<std::pair<int32_t, float>> logit_bias;

  uint64_t seed = 0;              // the Sampler's own mt19937_64 starts from it
  std::vector<std::string> stop;  // stop strings (see stop_criteria.h)
  bool ignore_eos = false;        // honoured by the scheduler's stop checks, not here

  // Output rules the engine's request state applies around the Sampler
  // (token_filter.h for the bans, the text stream for the text options):
  // Until this many tokens are output, end-of-generation tokens and
  // stop_token_ids are banned and stop strings do not end the output.
  int min_tokens = 0;
  // Sampling one of these ends the output ("stop"); the token's text is
  // left out unless include_stop_str_in_output.
  std::vector<int32_t> stop_token_ids;
  // The stop string (or stop token) that ended the output stays in its text.
  bool include_stop_str_in_output = false;
  // Not empty: no other token can be sampled.
  std::vector<int32_t> allowed_token_ids;
  // Token sequences the output may never complete: the last token of each
  // is banned wherever the output ends with the ones before it (a
  // one-token sequence is banned everywhere).
  std::vector<std::vector<int32_t>> bad_words_ids;
  // Text of control tokens (<s>, <|im_end|>, ...) in the output: left out
  // (default), or shown, each set apart by a space from its neighbours
  // when spaces_between_special_tokens.
  bool skip_special_tokens = true;
  bool spaces_between_special_tokens = true;

  // Throws tokenmill::Error naming the first field out of range (NaN included):
  // temperature in [0, kMaxTemperature], top_k >= 0, top_p in (0, 1], min_p in
  // [0, 1], repetition_penalty in (0, kMaxRepetitionPenalty], penalty_last_n >= -1,
  // |frequency_penalty| and |presence_penalty| <= 2, logit_bias ids in
  // [0, vocab_size) with a value that is finite or -inf, at most
  // kMaxStopStrings stop strings, none empty; typical_p in (0, 1],
  // min_tokens >= 0, at most kMaxStopTokenIds stop_token_ids and
  // kMaxBadWordSequences bad_words_ids (none empty), every id of them and of
  // allowed_token_ids in [0, vocab_size).
  void validate(int32_t vocab_size) const;
};

}  // namespace tokenmill::sample
