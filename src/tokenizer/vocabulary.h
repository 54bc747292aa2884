// The token table shared by the SentencePiece and byte-level BPE algorithms:
// token texts, scores and types, and a hash map from text to id built once at
// construction (O(num_tokens); about 30 ms for a 262144-token vocabulary).
// Immutable after construction, so it is safe to share between threads.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace tokenmill::tokenizer {

inline constexpr int32_t kNoToken = -1;

// GGUF tokenizer.ggml.token_type values (llama.cpp / SentencePiece numbering).
enum class TokenType : uint8_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

// Transparent hashing so that lookups by string_view allocate nothing.
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
template <typename V>
using StringMap = std::unordered_map<std::string, V, StringHash, std::equal_to<>>;

class Vocabulary {
 public:
  Vocabulary() = default;
  // scores and types are either empty (all 0 / all normal) or one per token;
  // the caller has checked that. When a text occurs twice, the later id wins
  // (as in llama.cpp).
  Vocabulary(std::vector<std::string> texts, std::vector<float> scores, std::vector<TokenType> types);

  int32_t size() const { return static_cast<int32_t>(texts_.size()); }
  bool contains(int32_t id) const { return id >= 0 && id < size(); }
  // Preconditions for the accessors: contains(id).
  const std::string& text(int32_t id) const { return texts_[static_cast<size_t>(id)]; }
  float score(int32_t id) const { return scores_.empty() ? 0.0f : scores_[static_cast<size_t>(id)]; }
  TokenType type(int32_t id) const { return types_[static_cast<size_t>(id)]; }
  void set_type(int32_t id, TokenType type) { types_[static_cast<size_t>(id)] = type; }

  // The id whose text is exactly `text`, or kNoToken.
  int32_t find(std::string_view text) const {
    auto it = ids_.find(text);
    return it == ids_.end() ? kNoToken : it->second;
  }

 private:
  std::vector<std::string> texts_;
  std::vector<float> scores_;
  std::vector<TokenType> types_;
  StringMap<int32_t> ids_;
};

}  // namespace tokenmill::tokenizer
