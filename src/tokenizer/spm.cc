#include "tokenizer/spm.h"

#include <cstdio>
#include <queue>
#include <string>

#include "tokenizer/unicode.h"

namespace tokenmill::tokenizer {
namespace {

// A run of text in the doubly linked list of symbols; n == 0 once merged away.
struct SpmSymbol {
  int prev;
  int next;
  size_t start;
  size_t n;
};

struct SpmBigram {
  int left;
  int right;
  float score;
  size_t size;  // bytes of the merged text, to recognise stale entries
};

struct SpmBigramOrder {
  // Highest score first; on ties the leftmost pair.
  bool operator()(const SpmBigram& a, const SpmBigram& b) const {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  }
};

class SpmSession {
 public:
  SpmSession(const Vocabulary& vocab, std::string_view text) : vocab_(vocab), text_(text) {}

  void run(const std::array<int32_t, 256>& byte_tokens, std::vector<int32_t>& out) {
    split_characters();
    for (int i = 1; i < static_cast<int>(symbols_.size()); ++i) try_add_bigram(i - 1, i);
    while (!queue_.empty()) {
      SpmBigram bigram = queue_.top();
      queue_.pop();
      SpmSymbol& left = symbols_[bigram.left];
      SpmSymbol& right = symbols_[bigram.right];
      if (left.n == 0 || right.n == 0 || left.n + right.n != bigram.size) continue;  // stale
      left.n += right.n;
      right.n = 0;
      left.next = right.next;
      if (right.next >= 0) symbols_[right.next].prev = bigram.left;
      try_add_bigram(left.prev, bigram.left);
      try_add_bigram(bigram.left, left.next);
    }
    if (symbols_.empty()) return;
    for (int i = 0; i != -1; i = symbols_[i].next) emit(symbols_[i], byte_tokens, out);
  }

 private:
  void split_characters() {
    size_t offs = 0;
    int index = 0;
    while (offs < text_.size()) {
      // A valid character, or one byte of text that is not UTF-8 (llama.cpp
      // would swallow the following bytes with it; one byte keeps them intact).
      const int n = utf8_check_sequence(text_.substr(offs));
      const size_t len = n > 0 ? static_cast<size_t>(n) : 1;
      SpmSymbol sym{index - 1, offs + len == text_.size() ? -1 : index + 1, offs, len};
      symbols_.push_back(sym);
      offs += len;
      ++index;
    }
  }

  void try_add_bigram(int left, int right) {
    if (left < 0 || right < 0) return;
    const SpmSymbol& l = symbols_[left];
    const SpmSymbol& r = symbols_[right];
    // Adjacent live symbols are contiguous in the text.
    int32_t id = vocab_.find(text_.substr(l.start, l.n + r.n));
    if (id == kNoToken) return;
    queue_.push(SpmBigram{left, right, vocab_.score(id), l.n + r.n});
  }

  // Every merged symbol is a token by construction; only single characters
  // can be missing from the vocabulary, and those become byte tokens.
  void emit(const SpmSymbol& sym, const std::array<int32_t, 256>& byte_tokens, std::vector<int32_t>& out) const {
    std::string_view piece = text_.substr(sym.start, sym.n);
    int32_t id = vocab_.find(piece);
    if (id != kNoToken) {
      out.push_back(id);
      return;
    }
    for (char c : piece) {
      int32_t byte_id = byte_tokens[static_cast<uint8_t>(c)];
      if (byte_id != kNoToken) out.push_back(byte_id);
    }
  }

  const Vocabulary& vocab_;
  std::string_view text_;
  std::vector<SpmSymbol> symbols_;
  std::priority_queue<SpmBigram, std::vector<SpmBigram>, SpmBigramOrder> queue_;
};

}  // namespace

std::array<int32_t, 256> spm_byte_tokens(const Vocabulary& vocab, int32_t unk_id) {
  std::array<int32_t, 256> table{};
  for (int b = 0; b < 256; ++b) {
    char hex[8];
    std::snprintf(hex, sizeof hex, "<0x%02X>", b);
    int32_t id = vocab.find(hex);
    if (id == kNoToken) id = vocab.find(std::string(1, static_cast<char>(b)));
    table[b] = id == kNoToken ? unk_id : id;
  }
  return table;
}

void spm_tokenize(const Vocabulary& vocab, const std::array<int32_t, 256>& byte_tokens, std::string_view text,
                  std::vector<int32_t>& out) {
  SpmSession session(vocab, text);
  session.run(byte_tokens, out);
}

}  // namespace tokenmill::tokenizer
