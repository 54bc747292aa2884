#include "bench/prompt_builder.h"

#include <cstdlib>
#include <set>

#include "bench/rng.h"

namespace tokenmill::bench {
namespace {

// Short, frequent English words: single tokens (with a leading space) in
// the Llama, Gemma, GPT-2 and Qwen vocabularies alike.
constexpr const char* kWords[] = {
    "the",   "of",      "and",     "to",        "in",      "is",       "it",        "that",   "was",      "for",
    "on",    "are",     "as",      "with",      "his",     "they",     "at",        "be",     "this",     "have",
    "from",  "or",      "one",     "had",       "by",      "word",     "but",       "not",    "what",     "all",
    "were",  "we",      "when",    "your",      "can",     "said",     "there",     "use",    "an",       "each",
    "which", "she",     "do",      "how",       "their",   "if",       "will",      "up",     "other",    "about",
    "out",   "many",    "then",    "them",      "these",   "so",       "some",      "her",    "would",    "make",
    "like",  "him",     "into",    "time",      "has",     "look",     "two",       "more",   "write",    "go",
    "see",   "number",  "no",      "way",       "could",   "people",   "my",        "than",   "first",    "water",
    "been",  "call",    "who",     "oil",       "its",     "now",      "find",      "long",   "down",     "day",
    "did",   "get",     "come",    "made",      "may",     "part",     "over",      "new",    "sound",    "take",
    "only",  "little",  "work",    "know",      "place",   "year",     "live",      "me",     "back",     "give",
    "most",  "very",    "after",   "thing",     "our",     "just",     "name",      "good",   "man",      "think",
    "say",   "great",   "where",   "help",      "through", "much",     "before",    "line",   "right",    "too",
    "mean",  "old",     "any",     "same",      "tell",    "boy",      "follow",    "came",   "want",     "show",
    "also",  "around",  "form",    "three",     "small",   "set",      "put",       "end",    "does",     "another",
    "well",  "large",   "must",    "big",       "even",    "such",     "because",   "turn",   "here",     "why",
    "ask",   "went",    "men",     "read",      "need",    "land",     "different", "home",   "us",       "move",
    "try",   "kind",    "hand",    "picture",   "again",   "change",   "off",       "play",   "spell",    "air",
    "away",  "animal",  "house",   "point",     "page",    "letter",   "mother",    "answer", "found",    "study",
    "still", "learn",   "should",  "world",     "high",    "every",    "near",      "add",    "food",     "between",
    "own",   "below",   "country", "plant",     "last",    "school",   "father",    "keep",   "tree",     "never",
    "start", "city",    "earth",   "eye",       "light",   "thought",  "head",      "under",  "story",    "saw",
    "left",  "few",     "while",   "along",     "might",   "close",    "something", "seem",   "next",     "hard",
    "open",  "example", "begin",   "life",      "always",  "those",    "both",      "paper",  "together", "got",
    "group", "often",   "run",     "important", "until",   "children", "side",      "feet",   "car",      "mile",
    "night", "walk"};
constexpr int64_t kNumWords = sizeof(kWords) / sizeof(kWords[0]);
constexpr int kMaxFitSteps = 24;

}  // namespace

int64_t count_words(const std::string& text) {
  int64_t n = 0;
  bool in_word = false;
  for (char c : text) {
    const bool space = c == ' ' || c == '\n' || c == '\t' || c == '\r';
    if (!space && !in_word) ++n;
    in_word = !space;
  }
  return n;
}

int64_t PromptBuilder::count(const std::string& text) {
  ++counter_calls_;
  return counter_(text);
}

std::string PromptBuilder::words(uint64_t seed, int64_t num_words) {
  Rng rng(seed);
  std::string out;
  out.reserve(static_cast<size_t>(num_words) * 6);
  for (int64_t i = 0; i < num_words; ++i) {
    if (i) out += ' ';
    out += kWords[rng.uniform_int(0, kNumWords - 1)];
  }
  return out;
}

// Newton-like steps on the word count, using the tokens-per-word ratio seen
// so far; stops when exact, or when a count repeats (then the closest wins).
std::pair<std::string, int64_t> PromptBuilder::fit(const std::string& head, int64_t head_tokens, uint64_t seed,
                                                   int64_t target) {
  const std::string sep = head.empty() ? "" : " ";
  int64_t num_words = std::max<int64_t>(0, target - head_tokens);
  std::string best_text = head;
  int64_t best_tokens = head_tokens;
  std::set<int64_t> tried;
  for (int step = 0; step < kMaxFitSteps && tried.insert(num_words).second; ++step) {
    const std::string text = num_words ? head + sep + words(seed, num_words) : head;
    const int64_t tokens = num_words ? count(text) : head_tokens;
    if (std::llabs(tokens - target) < std::llabs(best_tokens - target) ||
        (std::llabs(tokens - target) == std::llabs(best_tokens - target) && tokens < best_tokens)) {
      best_text = text;
      best_tokens = tokens;
    }
    if (tokens == target) break;
    const double per_word =
        num_words > 0 && tokens > head_tokens ? double(tokens - head_tokens) / double(num_words) : 1.0;
    int64_t delta = static_cast<int64_t>(double(target - tokens) / per_word);
    if (delta == 0) delta = target > tokens ? 1 : -1;
    num_words = std::max<int64_t>(0, num_words + delta);
  }
  return {best_text, best_tokens};
}

BuiltPrompt PromptBuilder::build(int64_t tokens, int64_t shared_tokens, uint64_t doc_seed, uint64_t word_seed) {
  BuiltPrompt out;
  std::string head;
  if (shared_tokens > 0) {
    const auto key = std::make_pair(doc_seed, shared_tokens);
    auto it = shared_cache_.find(key);
    if (it == shared_cache_.end()) it = shared_cache_.emplace(key, fit("", 0, doc_seed, shared_tokens)).first;
    head = it->second.first;
    out.shared_tokens = it->second.second;
  }
  if (tokens <= out.shared_tokens) {
    out.text = head;
    out.tokens = out.shared_tokens;
    return out;
  }
  auto [text, n] = fit(head, out.shared_tokens, word_seed, tokens);
  out.text = std::move(text);
  out.tokens = n;
  return out;
}

}  // namespace tokenmill::bench
