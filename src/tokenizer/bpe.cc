#include "tokenizer/bpe.h"

#include <queue>

#include "tokenizer/unicode.h"

namespace tokenmill::tokenizer {
namespace {

struct BpeSymbol {
  int prev;
  int next;
  size_t start;
  size_t n;  // 0 once merged into its left neighbour
};

struct BpeBigram {
  int left;
  int right;
  int32_t rank;
  size_t left_n;  // the sizes when queued: a changed size marks a stale entry
  size_t right_n;
};

struct BpeBigramOrder {
  // Lowest rank first; on ties the leftmost pair.
  bool operator()(const BpeBigram& a, const BpeBigram& b) const {
    return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
  }
};

class BpeSession {
 public:
  BpeSession(const BpeMerges& merges, std::string_view word) : merges_(merges), word_(word) {}

  // Runs the merges; returns the surviving symbols' texts in order.
  std::vector<std::string_view> run() {
    split_characters();
    for (int i = 1; i < static_cast<int>(symbols_.size()); ++i) try_add_bigram(i - 1, i);
    while (!queue_.empty()) {
      BpeBigram bigram = queue_.top();
      queue_.pop();
      BpeSymbol& left = symbols_[bigram.left];
      BpeSymbol& right = symbols_[bigram.right];
      if (left.n == 0 || right.n == 0 || left.n != bigram.left_n || right.n != bigram.right_n) {
        continue;  // stale
      }
      left.n += right.n;
      right.n = 0;
      left.next = right.next;
      if (right.next >= 0) symbols_[right.next].prev = bigram.left;
      try_add_bigram(left.prev, bigram.left);
      try_add_bigram(bigram.left, left.next);
    }
    std::vector<std::string_view> pieces;
    for (const BpeSymbol& s : symbols_) {
      if (s.n > 0) pieces.push_back(word_.substr(s.start, s.n));
    }
    return pieces;
  }

 private:
  void split_characters() {
    size_t offs = 0;
    int index = 0;
    while (offs < word_.size()) {
      size_t len = std::min(utf8_char_length(static_cast<uint8_t>(word_[offs])), word_.size() - offs);
      symbols_.push_back(BpeSymbol{index - 1, offs + len == word_.size() ? -1 : index + 1, offs, len});
      offs += len;
      ++index;
    }
  }

  void try_add_bigram(int left, int right) {
    if (left < 0 || right < 0) return;
    const BpeSymbol& l = symbols_[left];
    const BpeSymbol& r = symbols_[right];
    int32_t rank = merges_.rank(word_.substr(l.start, l.n), word_.substr(r.start, r.n));
    if (rank < 0) return;
    queue_.push(BpeBigram{left, right, rank, l.n, r.n});
  }

  const BpeMerges& merges_;
  std::string_view word_;
  std::vector<BpeSymbol> symbols_;
  std::priority_queue<BpeBigram, std::vector<BpeBigram>, BpeBigramOrder> queue_;
};

}  // namespace

BpeMerges::BpeMerges(const std::vector<std::string>& lines) {
  ranks_.reserve(lines.size());
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string& line = lines[i];
    if (line.size() < 2 || line.find(' ', 1) == std::string::npos) continue;
    ranks_.emplace(line, static_cast<int32_t>(i));  // emplace keeps the first rank
  }
}

int32_t BpeMerges::rank(std::string_view left, std::string_view right) const {
  // A merge line splits at its first space after the first character, so a
  // left part with a space there can never match; rejecting it keeps the
  // joined key unambiguous.
  if (left.empty() || left.find(' ', 1) != std::string_view::npos) return -1;
  std::string key;
  key.reserve(left.size() + 1 + right.size());
  key.append(left).push_back(' ');
  key.append(right);
  auto it = ranks_.find(key);
  return it == ranks_.end() ? -1 : it->second;
}

void bpe_tokenize_word(const Vocabulary& vocab, const BpeMerges& merges, std::string_view word, bool ignore_merges,
                       std::vector<int32_t>& out) {
  if (word.empty()) return;
  if (ignore_merges) {
    int32_t id = vocab.find(word);
    if (id != kNoToken) {
      out.push_back(id);
      return;
    }
  }
  BpeSession session(merges, word);
  for (std::string_view piece : session.run()) {
    int32_t id = vocab.find(piece);
    if (id != kNoToken) {
      out.push_back(id);
      continue;
    }
    for (char c : piece) {
      int32_t byte_id = vocab.find(std::string_view(&c, 1));
      if (byte_id != kNoToken) out.push_back(byte_id);
    }
  }
}

}  // namespace tokenmill::tokenizer
