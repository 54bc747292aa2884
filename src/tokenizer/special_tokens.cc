#include "tokenizer/special_tokens.h"

#include <algorithm>

namespace tokenmill::tokenizer {

SpecialTokenMatcher::SpecialTokenMatcher(const Vocabulary& vocab, std::vector<int32_t> ids) {
  std::erase_if(ids, [&](int32_t id) { return vocab.text(id).empty(); });
  std::sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) {
    size_t la = vocab.text(a).size(), lb = vocab.text(b).size();
    return la != lb ? la > lb : a < b;
  });
  order_ = std::move(ids);
  terminal_rank_.push_back(-1);
  for (size_t rank = 0; rank < order_.size(); ++rank) {
    const std::string& text = vocab.text(order_[rank]);
    texts_.push_back(text);
    first_byte_[static_cast<uint8_t>(text[0])] = true;
    int32_t node = 0;
    for (char c : text) {
      uint64_t key = (static_cast<uint64_t>(node) << 8) | static_cast<uint8_t>(c);
      auto [it, inserted] = edges_.try_emplace(key, static_cast<int32_t>(terminal_rank_.size()));
      if (inserted) terminal_rank_.push_back(-1);
      node = it->second;
    }
    // Two tokens with the same text: the first in order (lower id) matches.
    if (terminal_rank_[node] < 0) terminal_rank_[node] = static_cast<int32_t>(rank);
  }
}

std::vector<bool> SpecialTokenMatcher::ranks_present(std::string_view text) const {
  std::vector<bool> present(order_.size(), false);
  for (size_t i = 0; i < text.size(); ++i) {
    if (!first_byte_[static_cast<uint8_t>(text[i])]) continue;
    int32_t node = 0;
    for (size_t j = i; j < text.size(); ++j) {
      auto it = edges_.find((static_cast<uint64_t>(node) << 8) | static_cast<uint8_t>(text[j]));
      if (it == edges_.end()) break;
      node = it->second;
      if (terminal_rank_[node] >= 0) present[static_cast<size_t>(terminal_rank_[node])] = true;
    }
  }
  return present;
}

std::vector<Fragment> SpecialTokenMatcher::split(std::string_view text) const {
  std::vector<Fragment> fragments;
  if (text.empty()) return fragments;
  fragments.push_back({kNoToken, 0, text.size()});
  if (empty()) return fragments;
  // Each token, longest first, takes its leftmost non-overlapping
  // occurrences out of what is still raw text. Only the tokens the text
  // holds at all are searched for (one trie pass finds them), each with
  // one pass of string search over the raw fragments: time O(text x trie
  // depth + text x tokens present), memory O(fragments). (Listing every
  // occurrence first cost O(text x depth) memory: 200 KB of spaces, which
  // Gemma's vocabulary has tokens of every run length up to 31 for, took
  // 200 MB.)
  const std::vector<bool> present = ranks_present(text);
  std::vector<Fragment> next;
  for (size_t rank = 0; rank < order_.size(); ++rank) {
    if (!present[rank]) continue;
    const std::string_view needle = texts_[rank];
    const int32_t token = order_[rank];
    next.clear();
    for (const Fragment& f : fragments) {
      if (f.token != kNoToken || f.end - f.begin < needle.size()) {
        next.push_back(f);
        continue;
      }
      size_t cur = f.begin;
      const std::string_view raw = text.substr(0, f.end);
      for (size_t pos = raw.find(needle, cur); pos != std::string_view::npos; pos = raw.find(needle, cur)) {
        if (pos > cur) next.push_back({kNoToken, cur, pos});
        next.push_back({token, pos, pos + needle.size()});
        cur = pos + needle.size();
      }
      if (cur < f.end) next.push_back({kNoToken, cur, f.end});
    }
    fragments.swap(next);
  }
  return fragments;
}

}  // namespace tokenmill::tokenizer
