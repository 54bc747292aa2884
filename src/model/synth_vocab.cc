#include "model/synth_vocab.h"

#include <fmt/format.h>

#include <array>
#include <string_view>
#include <unordered_set>

#include "util/error.h"

namespace tokenmill::model {
namespace {

// Frequent English words (many from children's stories, which is what the
// small test models speak), most frequent first: they get the best scores.
constexpr std::array<std::string_view, 120> kWords = {
    "the",  "and",    "a",     "to",     "was",   "he",    "she",   "it",    "of",     "in",    "they",   "you",
    "said", "his",    "her",   "with",   "on",    "that",  "for",   "is",    "day",    "I",     "The",    "Once",
    "upon", "time",   "there", "little", "girl",  "boy",   "named", "Lily",  "Tim",    "He",    "She",    "They",
    "had",  "saw",    "big",   "happy",  "play",  "mom",   "dog",   "cat",   "friend", "ball",  "tree",   "park",
    "went", "wanted", "very",  "so",     "but",   "not",   "we",    "can",   "be",     "have",  "do",     "go",
    "see",  "like",   "one",   "all",    "what",  "when",  "up",    "out",   "at",     "from",  "this",   "my",
    "your", "are",    "were",  "will",   "would", "could", "then",  "about", "just",   "know",  "people", "good",
    "new",  "first",  "way",   "make",   "look",  "more",  "man",   "world", "year",   "hello", "an",     "or",
    "if",   "by",     "as",    "him",    "them",  "their", "some",  "into",  "time",   "It",    "One",    "A",
    "But",  "And",    "found", "toy",    "sun",   "sky",   "water", "home",  "love",   "help",  "smiled", "loved",
};

// Word endings and fragments that recur inside words.
constexpr std::array<std::string_view, 24> kSubwords = {
    "ing", "ed", "er", "es", "ly", "tion", "ment", "ness", "able", "est", "ful", "less",
    "re",  "un", "in", "th", "he", "an",   "nd",   "on",   "at",   "en",  "ou",  "st",
};

size_t utf8_length(unsigned char lead) {
  if (lead < 0x80) return 1;
  if ((lead >> 5) == 0x6) return 2;
  if ((lead >> 4) == 0xE) return 3;
  return 4;
}

class VocabBuilder {
 public:
  explicit VocabBuilder(int64_t size) : size_(size) {}

  bool full() const { return static_cast<int64_t>(vocab_.tokens.size()) >= size_; }

  void add(std::string token, float score, int32_t type) {
    if (full() || !seen_.insert(token).second) return;
    vocab_.tokens.push_back(std::move(token));
    vocab_.scores.push_back(score);
    vocab_.types.push_back(type);
  }

  // Adds the piece's prefixes, shortest first, then the piece itself: the
  // SPM merge loop only reaches a piece whose pieces are in the table.
  void add_piece(std::string_view piece) {
    size_t at = 0;
    while (at < piece.size()) {
      at += utf8_length(static_cast<unsigned char>(piece[at]));
      add_normal(std::string(piece.substr(0, at)));
    }
  }

  VocabTables take() { return std::move(vocab_); }

 private:
  void add_normal(std::string token) { add(std::move(token), -static_cast<float>(vocab_.tokens.size()), kTokenNormal); }

  int64_t size_;
  VocabTables vocab_;
  std::unordered_set<std::string> seen_;
};

void add_letter_ngrams(VocabBuilder& b, int length, bool with_marker) {
  std::string gram(static_cast<size_t>(length), 'a');
  while (!b.full()) {
    b.add_piece(with_marker ? std::string(kSpaceMarker) + gram : gram);
    int i = length - 1;  // odometer increment over a..z
    while (i >= 0 && gram[static_cast<size_t>(i)] == 'z') gram[static_cast<size_t>(i--)] = 'a';
    if (i < 0) return;
    ++gram[static_cast<size_t>(i)];
  }
}

std::string utf8_encode(int code_point) {  // code_point < 0x800 here
  if (code_point < 0x80) return std::string(1, static_cast<char>(code_point));
  return {static_cast<char>(0xC0 | (code_point >> 6)), static_cast<char>(0x80 | (code_point & 0x3F))};
}

// GPT-2's byte-to-unicode map: printable bytes stand for themselves, the
// others (controls, space, DEL, NBSP, soft hyphen) take U+0100 onwards in
// byte order, so every token is printable text (a space is "Ġ").
const std::string& gpt2_byte_symbol(unsigned char byte) {
  static const std::array<std::string, 256> kTable = [] {
    std::array<std::string, 256> t;
    int next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174;
      t[static_cast<size_t>(b)] = utf8_encode(printable ? b : next++);
    }
    return t;
  }();
  return kTable[byte];
}

class BpeBuilder {
 public:
  explicit BpeBuilder(int64_t size) : size_(size) {}

  bool full() const { return static_cast<int64_t>(vocab_.tokens.size()) >= size_; }

  void add(std::string token, int32_t type) {
    if (!seen_.insert(token).second) return;
    vocab_.tokens.push_back(std::move(token));
    vocab_.types.push_back(type);
  }

  // Adds the merges that build the bytes of `text` one symbol at a time from
  // the left, each of whose prefixes is then a token too.
  void add_piece(std::string_view text) {
    std::string prefix = gpt2_byte_symbol(static_cast<unsigned char>(text[0]));
    for (size_t i = 1; i < text.size() && !full(); ++i) {
      const std::string& next = gpt2_byte_symbol(static_cast<unsigned char>(text[i]));
      std::string joined = prefix + next;
      if (!seen_.contains(joined)) {
        vocab_.merges.push_back(prefix + " " + next);
        add(joined, kTokenNormal);
      }
      prefix = std::move(joined);
    }
  }

  // Every n-gram over a..z of `length`, with a leading space or not, while
  // the table has room.
  void add_letter_ngrams(int length, bool with_space) {
    std::string gram(static_cast<size_t>(length), 'a');
    while (!full()) {
      add_piece(with_space ? " " + gram : gram);
      int i = length - 1;
      while (i >= 0 && gram[static_cast<size_t>(i)] == 'z') gram[static_cast<size_t>(i--)] = 'a';
      if (i < 0) return;
      ++gram[static_cast<size_t>(i)];
    }
  }

  BpeVocab take() { return std::move(vocab_); }

 private:
  int64_t size_;
  BpeVocab vocab_;
  std::unordered_set<std::string> seen_;
};

}  // namespace

BpeVocab builtin_bpe_vocab(int64_t size, const std::vector<std::string>& specials) {
  const int64_t num_special = static_cast<int64_t>(specials.size());
  if (size < 256 + num_special) {
    fail(
        "the built-in BPE vocabulary needs at least {} tokens (256 byte symbols and {} special tokens), got a "
        "vocabulary size of {}",
        256 + num_special, num_special, size);
  }
  BpeBuilder b(size - num_special);
  for (int byte = 0; byte < 256; ++byte) b.add(gpt2_byte_symbol(static_cast<unsigned char>(byte)), kTokenNormal);
  for (std::string_view word : kWords) b.add_piece(" " + std::string(word));
  for (std::string_view sub : kSubwords) b.add_piece(sub);
  for (int length = 1; !b.full(); ++length) {  // terminates: each length adds 26^length new pieces
    b.add_letter_ngrams(length, true);
    if (length > 1) b.add_letter_ngrams(length, false);
  }
  BpeVocab vocab = b.take();
  vocab.eos_id = static_cast<int32_t>(vocab.tokens.size());
  for (const std::string& s : specials) {
    vocab.tokens.push_back(s);
    vocab.types.push_back(kTokenControl);
  }
  return vocab;
}

void set_bpe_tokenizer_keys(gguf::GgufWriter& writer, const BpeVocab& vocab, const std::string& pre) {
  using gguf::Value;
  using gguf::ValueType;
  std::vector<Value> tokens, types, merges;
  for (size_t i = 0; i < vocab.tokens.size(); ++i) {
    tokens.push_back(Value::str(vocab.tokens[i]));
    types.push_back(Value::i32(vocab.types[i]));
  }
  for (const std::string& m : vocab.merges) merges.push_back(Value::str(m));
  writer.set("tokenizer.ggml.model", Value::str("gpt2"));
  writer.set("tokenizer.ggml.pre", Value::str(pre));
  writer.set("tokenizer.ggml.tokens", Value::array(ValueType::STRING, std::move(tokens)));
  writer.set("tokenizer.ggml.token_type", Value::array(ValueType::INT32, std::move(types)));
  writer.set("tokenizer.ggml.merges", Value::array(ValueType::STRING, std::move(merges)));
  writer.set("tokenizer.ggml.bos_token_id", Value::u32(static_cast<uint32_t>(vocab.eos_id)));
  writer.set("tokenizer.ggml.eos_token_id", Value::u32(static_cast<uint32_t>(vocab.eos_id)));
  writer.set("tokenizer.ggml.add_bos_token", Value::boolean(false));
}

VocabTables builtin_vocab(int64_t size) {
  if (size < kMinBuiltinVocab) {
    fail(
        "the built-in vocabulary needs at least {} tokens (<unk>, <s>, </s> and 256 byte "
        "tokens), got a vocabulary size of {}",
        kMinBuiltinVocab, size);
  }
  VocabBuilder b(size);
  b.add("<unk>", 0.0f, kTokenUnknown);
  b.add("<s>", 0.0f, kTokenControl);
  b.add("</s>", 0.0f, kTokenControl);
  for (int byte = 0; byte < 256; ++byte) b.add(fmt::format("<0x{:02X}>", byte), 0.0f, kTokenByte);
  b.add_piece(kSpaceMarker);
  for (char c = '!'; c <= '~'; ++c) b.add_piece(std::string(1, c));
  for (std::string_view word : kWords) b.add_piece(std::string(kSpaceMarker) + std::string(word));
  for (std::string_view sub : kSubwords) b.add_piece(sub);
  for (int length = 1; length <= 3; ++length) {
    add_letter_ngrams(b, length, true);
    if (length > 1) add_letter_ngrams(b, length, false);
  }
  for (int64_t i = 0; !b.full(); ++i) b.add(fmt::format("<extra_{}>", i), 0.0f, kTokenUnused);
  return b.take();
}

void set_spm_tokenizer_keys(gguf::GgufWriter& writer, const VocabTables& vocab) {
  using gguf::Value;
  using gguf::ValueType;
  std::vector<Value> tokens, scores, types;
  tokens.reserve(vocab.tokens.size());
  scores.reserve(vocab.tokens.size());
  types.reserve(vocab.tokens.size());
  for (size_t i = 0; i < vocab.tokens.size(); ++i) {
    tokens.push_back(Value::str(vocab.tokens[i]));
    scores.push_back(Value::f32(vocab.scores[i]));
    types.push_back(Value::i32(vocab.types[i]));
  }
  writer.set("tokenizer.ggml.model", Value::str("llama"));
  writer.set("tokenizer.ggml.tokens", Value::array(ValueType::STRING, std::move(tokens)));
  writer.set("tokenizer.ggml.scores", Value::array(ValueType::FLOAT32, std::move(scores)));
  writer.set("tokenizer.ggml.token_type", Value::array(ValueType::INT32, std::move(types)));
  writer.set("tokenizer.ggml.bos_token_id", Value::u32(1));
  writer.set("tokenizer.ggml.eos_token_id", Value::u32(2));
  writer.set("tokenizer.ggml.unknown_token_id", Value::u32(0));
  writer.set("tokenizer.ggml.add_bos_token", Value::boolean(true));
  writer.set("tokenizer.ggml.add_space_prefix", Value::boolean(true));
}

int64_t copy_tokenizer_keys(const gguf::GgufFile& from, gguf::GgufWriter& to) {
  const gguf::Value* tokens = from.find("tokenizer.ggml.tokens");
  if (tokens == nullptr || !tokens->is_array() || tokens->as_array().element_type != gguf::ValueType::STRING) {
    fail("'{}' has no vocabulary: tokenizer.ggml.tokens is missing or not a string array", from.name());
  }
  for (const gguf::MetadataEntry& e : from.metadata()) {
    if (e.key.starts_with("tokenizer.")) to.set(e.key, e.value);
  }
  return static_cast<int64_t>(tokens->as_array().items.size());
}

}  // namespace tokenmill::model
