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
    lengths_.push_back(text.size());
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

std::vector<SpecialTokenMatcher::Occurrence> SpecialTokenMatcher::find_occurrences(std::string_view text) const {
  std::vector<Occurrence> found;
  for (size_t i = 0; i < text.size(); ++i) {
    if (!first_byte_[static_cast<uint8_t>(text[i])]) continue;
    int32_t node = 0;
    for (size_t j = i; j < text.size(); ++j) {
      auto it = edges_.find((static_cast<uint64_t>(node) << 8) | static_cast<uint8_t>(text[j]));
      if (it == edges_.end()) break;
      node = it->second;
      if (terminal_rank_[node] >= 0) found.push_back({terminal_rank_[node], i});
    }
  }
  std::sort(found.begin(), found.end(), [](const Occurrence& a, const Occurrence& b) {
    return a.rank != b.rank ? a.rank < b.rank : a.pos < b.pos;
  });
  return found;
}

std::vector<Fragment> SpecialTokenMatcher::split(std::string_view text) const {
  std::vector<Fragment> fragments;
  if (text.empty()) return fragments;
  fragments.push_back({kNoToken, 0, text.size()});
  if (empty()) return fragments;
  const std::vector<Occurrence> found = find_occurrences(text);
  std::vector<Fragment> next;
  for (size_t g = 0; g < found.size();) {
    // One group: all occurrences of one token, by position.
    size_t g_end = g;
    while (g_end < found.size() && found[g_end].rank == found[g].rank) ++g_end;
    const int32_t rank = found[g].rank;
    const size_t len = lengths_[static_cast<size_t>(rank)];
    next.clear();
    size_t k = g;
    for (const Fragment& f : fragments) {
      if (f.token != kNoToken) {
        next.push_back(f);
        continue;
      }
      size_t cur = f.begin;
      while (k < g_end && found[k].pos < cur) ++k;
      for (; k < g_end && found[k].pos + len <= f.end; ++k) {
        size_t pos = found[k].pos;
        if (pos < cur) continue;  // overlaps the previous match
        if (pos > cur) next.push_back({kNoToken, cur, pos});
        next.push_back({order_[static_cast<size_t>(rank)], pos, pos + len});
        cur = pos + len;
      }
      if (cur < f.end) next.push_back({kNoToken, cur, f.end});
    }
    fragments.swap(next);
    g = g_end;
  }
  return fragments;
}

}  // namespace tokenmill::tokenizer
