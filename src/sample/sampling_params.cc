#include "sample/sampling_params.h"

#include <cmath>

#include "util/error.h"

namespace tokenmill::sample {

namespace {

// `!(lo <= v && v <= hi)` rather than `v < lo || v > hi` so that NaN fails too.
void check_range(const char* name, float value, float lo, float hi) {
  if (!(lo <= value && value <= hi)) {
    fail("sampling parameter {} = {} is out of range: must be in [{}, {}]", name, value, lo, hi);
  }
}

// The rules applied around the Sampler (min_tokens, stop and allowed ids,
// bad words) and typical_p.
void validate_output_rules(const SamplingParams& p, int32_t vocab_size) {
  if (!(p.typical_p > 0.0f && p.typical_p <= 1.0f)) {
    fail("sampling parameter typical_p = {} is out of range: must be in (0, 1]", p.typical_p);
  }
  if (p.min_tokens < 0) fail("min_tokens = {} is out of range: must be >= 0", p.min_tokens);
  if (p.stop_token_ids.size() > kMaxStopTokenIds) {
    fail("too many stop_token_ids: {} (at most {})", p.stop_token_ids.size(), kMaxStopTokenIds);
  }
  if (p.bad_words_ids.size() > kMaxBadWordSequences) {
    fail("too many bad word sequences: {} (at most {})", p.bad_words_ids.size(), kMaxBadWordSequences);
  }
  auto check_id = [vocab_size](const char* what, int32_t id) {
    if (id < 0 || id >= vocab_size) fail("{} token id {} is outside the vocabulary [0, {})", what, id, vocab_size);
  };
  for (int32_t id : p.stop_token_ids) check_id("stop_token_ids", id);
  for (int32_t id : p.allowed_token_ids) check_id("allowed_token_ids", id);
  for (const std::vector<int32_t>& seq : p.bad_words_ids) {
    if (seq.empty()) fail("a bad word sequence is empty");
    for (int32_t id : seq) check_id("bad_words", id);
  }
}

}  // namespace

void SamplingParams::validate(int32_t vocab_size) const {
  check_range("temperature", temperature, 0.0f, kMaxTemperature);
  if (top_k < 0) fail("sampling parameter top_k = {} is out of range: must be >= 0 (0 = off)", top_k);
  if (!(top_p > 0.0f && top_p <= 1.0f)) {
    fail("sampling parameter top_p = {} is out of range: must be in (0, 1]", top_p);
  }
  check_range("min_p", min_p, 0.0f, 1.0f);
  if (!(repetition_penalty > 0.0f && repetition_penalty <= kMaxRepetitionPenalty)) {
    fail("sampling parameter repetition_penalty = {} is out of range: must be in (0, {}]", repetition_penalty,
         kMaxRepetitionPenalty);
  }
  if (penalty_last_n < -1) {
    fail("sampling parameter penalty_last_n = {} is out of range: must be >= -1 (-1 = whole history)", penalty_last_n);
  }
  check_range("frequency_penalty", frequency_penalty, -kMaxAbsFrequencyPenalty, kMaxAbsFrequencyPenalty);
  check_range("presence_penalty", presence_penalty, -kMaxAbsPresencePenalty, kMaxAbsPresencePenalty);
  for (const auto& [id, bias] : logit_bias) {
    if (id < 0 || id >= vocab_size) {
      fail("logit_bias token id {} is outside the vocabulary [0, {})", id, vocab_size);
    }
    // -inf bans a token; +inf or NaN would make the softmax undefined.
    if (std::isnan(bias) || bias == INFINITY) {
      fail("logit_bias value {} for token {} is invalid: must be finite or -inf", bias, id);
    }
  }
  if (stop.size() > kMaxStopStrings) {
    fail("too many stop strings: {} (at most {})", stop.size(), kMaxStopStrings);
  }
  for (size_t i = 0; i < stop.size(); ++i) {
    if (stop[i].empty()) fail("stop string #{} is empty", i);
  }
  validate_output_rules(*this, vocab_size);
}

}  // namespace tokenmill::sample
