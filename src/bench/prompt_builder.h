// Synthetic prompts with exact token counts. Text is made of common English
// words (one token each in the usual BPE/SPM vocabularies, with their leading
// space) and then adjusted, word by word, against the target's own token
// counter until it has exactly the asked-for number of tokens.
//
// Shared prefixes (to realise a cache-hit rate) are the first tokens of one
// "shared document" per doc seed: every prompt built with the same doc seed
// and shared length starts with the same text.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace tokenmill::bench {

// Number of tokens of a text, special tokens (BOS) left out. Must be
// deterministic; may throw Error (e.g. the server is unreachable).
using TokenCounter = std::function<int64_t(const std::string& text)>;

// Whitespace-separated words: the counter when no tokenizer is at hand.
int64_t count_words(const std::string& text);

struct BuiltPrompt {
  std::string text;
  int64_t tokens = 0;         // as counted; equals the target unless the counter made that impossible
  int64_t shared_tokens = 0;  // tokens of the shared prefix, as counted
};

class PromptBuilder {
 public:
  explicit PromptBuilder(TokenCounter counter) : counter_(std::move(counter)) {}

  // A prompt of `tokens` tokens whose first `shared_tokens` (< tokens, or 0)
  // come from shared document `doc_seed`; the rest are words drawn from
  // `word_seed`. Cost: a few counter calls (the shared part is memoized).
  BuiltPrompt build(int64_t tokens, int64_t shared_tokens, uint64_t doc_seed, uint64_t word_seed);

  int64_t counter_calls() const { return counter_calls_; }

 private:
  int64_t count(const std::string& text);
  // Text of the first `num_words` words of a word stream.
  static std::string words(uint64_t seed, int64_t num_words);
  // `head` (of `head_tokens` tokens) followed by the number of words from
  // stream `seed` whose total count is closest to `target` (exact when
  // possible), and that count.
  std::pair<std::string, int64_t> fit(const std::string& head, int64_t head_tokens, uint64_t seed, int64_t target);

  TokenCounter counter_;
  std::map<std::pair<uint64_t, int64_t>, std::pair<std::string, int64_t>> shared_cache_;
  int64_t counter_calls_ = 0;
};

}  // namespace tokenmill::bench
