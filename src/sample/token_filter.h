// Bans that depend on what a sequence has output so far, as a bit mask of
// allowed tokens beside the grammar's (bit i % 32 of word i / 32 set = token
// i may be sampled): vLLM's allowed_token_ids, bad_words and min_tokens.
// The request state ANDs them into the mask it passes to the Sampler, which
// applies it before bias and penalties, so a banned token can never be
// drawn whatever its bias.
//
// Thread-safety: immutable after construction. Cost of apply(): one pass
// over the mask words with allowed_token_ids, plus O(total length of the
// bad word sequences) per call.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "sample/sampling_params.h"

namespace tokenmill::sample {

class TokenFilter {
 public:
  // end_ids: the tokens that end generation (EOS, EOT, <|im_end|> ...),
  // banned together with params.stop_token_ids while fewer than
  // params.min_tokens tokens are output. Precondition: params validated
  // against vocab_size.
  TokenFilter(const SamplingParams& params, std::span<const int32_t> end_ids, int32_t vocab_size);

  // False when apply() can never ban anything (no rule is set).
  bool active() const { return !allowed_.empty() || min_tokens_ > 0 || !bad_words_.empty(); }
  // False when apply() bans nothing after `num_output` tokens (min_tokens
  // alone stops banning once it is reached).
  bool active_after(size_t num_output) const {
    return !allowed_.empty() || static_cast<int64_t>(num_output) < min_tokens_ || !bad_words_.empty();
  }

  // Clears in `mask` the bit of every token banned after `output` (the
  // tokens output so far, prompt excluded). mask: [ceil(vocab / 32)].
  void apply(std::span<const int32_t> output, std::span<uint32_t> mask) const;

 private:
  std::vector<uint32_t> allowed_;  // [ceil(vocab / 32)]; empty: every token
  int min_tokens_ = 0;
  std::vector<int32_t> min_token_bans_;  // end ids and stop ids
  std::vector<std::vector<int32_t>> bad_words_;
};

// Sets (allowed) or clears (banned) token id's bit in a mask as above.
inline void set_mask_bit(std::span<uint32_t> mask, int32_t id, bool allowed) {
  const uint32_t bit = 1u << (static_cast<uint32_t>(id) % 32);
  uint32_t& word = mask[static_cast<size_t>(id) / 32];
  word = allowed ? word | bit : word & ~bit;
}
inline bool mask_bit(std::span<const uint32_t> mask, int32_t id) {
  return ((mask[static_cast<size_t>(id) / 32] >> (static_cast<uint32_t>(id) % 32)) & 1u) != 0;
}

}  // namespace tokenmill::sample
