#include "tokenizer/special_tokens.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

namespace tokenmill::tokenizer {
namespace {

struct Piece {
  int32_t token;
  std::string text;
  bool operator==(const Piece&) const = default;
};

std::ostream& operator<<(std::ostream& os, const Piece& p) { return os << "{" << p.token << ", \"" << p.text << "\"}"; }

std::vector<Piece> split(const std::vector<std::string>& texts, std::vector<int32_t> ids, std::string_view text) {
  Vocabulary vocab(texts, {}, {});
  SpecialTokenMatcher matcher(vocab, std::move(ids));
  std::vector<Piece> out;
  for (const Fragment& f : matcher.split(text)) {
    out.push_back({f.token, std::string(text.substr(f.begin, f.end - f.begin))});
  }
  return out;
}

TEST(SpecialTokenMatcher, SplitsAroundEveryOccurrence) {
  EXPECT_EQ(split({"<s>", "x"}, {0}, "a<s>b<s><s>"),
            (std::vector<Piece>{{-1, "a"}, {0, "<s>"}, {-1, "b"}, {0, "<s>"}, {0, "<s>"}}));
}

TEST(SpecialTokenMatcher, LongerTokensAreTakenFirstEverywhere) {
  // llama.cpp's order: "bcd" (longer) splits first, so "ab" no longer fits,
  // although a leftmost scan would have taken "ab".
  EXPECT_EQ(split({"ab", "bcd"}, {0, 1}, "abcd"), (std::vector<Piece>{{-1, "a"}, {1, "bcd"}}));
  EXPECT_EQ(split({"<|a|>", "<|a|>x"}, {0, 1}, "<|a|>x<|a|>"), (std::vector<Piece>{{1, "<|a|>x"}, {0, "<|a|>"}}));
}

TEST(SpecialTokenMatcher, OverlappingOccurrencesOfOneTokenTakeTheLeftmost) {
  EXPECT_EQ(split({"aa"}, {0}, "aaa"), (std::vector<Piece>{{0, "aa"}, {-1, "a"}}));
}

TEST(SpecialTokenMatcher, NoTokensOrEmptyText) {
  EXPECT_EQ(split({"<s>"}, {}, "a<s>"), (std::vector<Piece>{{-1, "a<s>"}}));
  EXPECT_TRUE(split({"<s>"}, {0}, "").empty());
  EXPECT_EQ(split({"", "<s>"}, {0, 1}, "ab"), (std::vector<Piece>{{-1, "ab"}}));
}

// The rule written the slow way, independently: list every occurrence of
// every token by brute force, then let the tokens, longest first (ties:
// lower id), take their leftmost non-overlapping occurrences that lie in
// raw text.
std::vector<Piece> reference_split(const std::vector<std::string>& texts, std::string_view text) {
  std::vector<int> order(texts.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return texts[a].size() > texts[b].size(); });
  std::vector<int> owner(text.size(), -1);  // token covering each byte, or -1
  std::vector<bool> starts(text.size(), false);
  std::vector<std::string> seen;
  for (int id : order) {
    const std::string& t = texts[static_cast<size_t>(id)];
    if (std::find(seen.begin(), seen.end(), t) != seen.end()) continue;  // the same text: the first id only
    seen.push_back(t);
    for (size_t pos = 0; pos + t.size() <= text.size();) {
      bool free = text.substr(pos, t.size()) == t;
      for (size_t k = pos; free && k < pos + t.size(); ++k) free = owner[k] < 0;
      if (!free) {
        ++pos;
        continue;
      }
      for (size_t k = pos; k < pos + t.size(); ++k) owner[k] = id;
      starts[pos] = true;
      pos += t.size();
    }
  }
  std::vector<Piece> out;
  for (size_t i = 0; i < text.size();) {
    if (owner[i] >= 0) {
      const size_t n = texts[static_cast<size_t>(owner[i])].size();
      out.push_back({owner[i], std::string(text.substr(i, n))});
      i += n;
      continue;
    }
    size_t j = i;
    while (j < text.size() && owner[j] < 0) ++j;
    out.push_back({-1, std::string(text.substr(i, j - i))});
    i = j;
  }
  return out;
}

TEST(SpecialTokenMatcher, RandomTextsSplitAsTheRuleSays) {
  // Whitespace runs of every length (as Gemma's vocabulary has them),
  // tokens inside tokens, repeated texts.
  const std::vector<std::string> texts = {" ", "  ", "   ", "    ", "<a>", "<a><a>", "a>", "<", "ab", "b<a", "ab"};
  std::vector<int32_t> ids(texts.size());
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(i);
  std::mt19937 rng(11);
  const char alphabet[] = " <a>b";
  for (int round = 0; round < 500; ++round) {
    std::string text;
    for (int n = static_cast<int>(rng() % 40); n > 0; --n) text += alphabet[rng() % 5];
    EXPECT_EQ(split(texts, ids, text), reference_split(texts, text)) << "'" << text << "'";
  }
}

TEST(SpecialTokenMatcher, LongRunsCostLinearMemory) {
  // 1 MB of spaces against tokens for every run length up to 31: the
  // fragments are all there is (before: one list entry per byte and token).
  std::vector<std::string> texts;
  for (int n = 1; n <= 31; ++n) texts.push_back(std::string(static_cast<size_t>(n), ' '));
  std::vector<int32_t> ids(texts.size());
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(i);
  const std::string text(1'000'003, ' ');
  const std::vector<Piece> pieces = split(texts, ids, text);
  ASSERT_EQ(pieces.size(), 1'000'003u / 31 + 1);
  EXPECT_EQ(pieces.front(), (Piece{30, std::string(31, ' ')}));
  EXPECT_EQ(pieces.back(), (Piece{1'000'003 % 31 - 1, std::string(1'000'003 % 31, ' ')}));
}

}  // namespace
}  // namespace tokenmill::tokenizer
