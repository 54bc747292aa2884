// Log-probabilities of a logits row under the plain softmax (temperature 1,
// no filters): what the OpenAI `logprobs` field and perplexity report.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace tokenmill::sample {

// log(sum_i exp(logits[i])), computed stably in double, NaN logits skipped.
// -inf if every logit is -inf. Cost: one pass with exp per element.
double log_sum_exp(std::span<const float> logits);  // [vocab]

// log softmax(logits)[id]. Precondition: id in [0, logits.size()).
// Cost: one log_sum_exp pass; callers needing many ids of one row should call
// log_sum_exp once and subtract themselves.
float logprob_of(std::span<const float> logits,  // [vocab]
                 int32_t id);

// The n most probable tokens with their log-probabilities, best first, ties
// broken by the lower id; fewer than n if the row is shorter. NaN logits are
// skipped. Cost: O(vocab log n) with an n-element heap, no vocab-sized buffer.
std::vector<std::pair<int32_t, float>> top_logprobs(std::span<const float> logits,  // [vocab]
                                                    int n);

}  // namespace tokenmill::sample
