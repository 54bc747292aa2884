#include "tokenizer/special_tokens.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace tokenmill::tokenizer
