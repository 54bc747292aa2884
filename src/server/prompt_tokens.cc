#include "server/prompt_tokens.h"

#include <algorithm>

#include "server/api_error.h"

namespace tokenmill::server {

std::vector<std::vector<int32_t>> bad_words_token_ids(const tokenizer::Tokenizer& tok,
                                                      std::span<const std::string> words) {
  std::vector<std::vector<int32_t>> out;
  auto add = [&out](std::vector<int32_t> ids) {
    if (!ids.empty() && std::find(out.begin(), out.end(), ids) == out.end()) out.push_back(std::move(ids));
  };
  for (const std::string& word : words) {
    const std::string bare = word.substr(std::min(word.size(), word.find_first_not_of(" \t\n\r")));
    std::vector<int32_t> plain = tok.encode(bare, /*add_special=*/false, /*parse_special=*/false);
    std::vector<int32_t> spaced = tok.encode(" " + bare, /*add_special=*/false, /*parse_special=*/false);
    const bool spaced_is_a_word = !plain.empty() && spaced.size() == plain.size() && spaced.front() != plain.front();
    add(std::move(plain));
    if (spaced_is_a_word) add(std::move(spaced));
  }
  return out;
}

namespace {

void keep_last(std::vector<int32_t>& prompt, int64_t k) {
  if (k <= 0 || static_cast<int64_t>(prompt.size()) <= k) return;
  prompt.erase(prompt.begin(), prompt.end() - k);
}

}  // namespace

void fit_prompt(std::vector<int32_t>& prompt, const SamplingRequest& r, const PromptRoom& room) {
  if (r.truncate_prompt_tokens)
    keep_last(prompt, *r.truncate_prompt_tokens == -1 ? room.max_model_len : *r.truncate_prompt_tokens);
  if (!r.n_keep || *r.n_keep < 0 || room.max_model_len <= 0) return;
  const auto len = static_cast<int64_t>(prompt.size());
  int64_t target = 0;
  if (room.max_tokens) {
    if (len + *room.max_tokens <= room.max_model_len) return;
    target = room.max_model_len - *room.max_tokens;
  } else {
    if (len < room.max_model_len) return;
    target = room.max_model_len / 2;
  }
  if (target <= *r.n_keep)
    bad_request("n_keep",
                "'n_keep' ({}) leaves no room to shorten the prompt of {} tokens: with the completion it must fit in "
                "{} tokens",
                *r.n_keep, len, std::max<int64_t>(target, 0));
  // The first n_keep tokens, then the last target - n_keep ones.
  const int64_t tail = target - *r.n_keep;
  prompt.erase(prompt.begin() + *r.n_keep, prompt.end() - tail);
}

void apply_prompt_fields(std::vector<std::vector<int32_t>>& prompts, SamplingRequest& r, const PromptRoom& room,
                         const tokenizer::Tokenizer* tok) {
  for (std::vector<int32_t>& p : prompts) fit_prompt(p, r, room);
  if (r.bad_words.empty()) return;
  if (tok == nullptr) bad_request("bad_words", "'bad_words' needs a model with a tokenizer");
  r.sampling.bad_words_ids = bad_words_token_ids(*tok, r.bad_words);
}

}  // namespace tokenmill::server
