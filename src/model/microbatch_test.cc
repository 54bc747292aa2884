// split_microbatches: every token lands in exactly one micro-batch, in
// order, with its position; logits rows keep their order and count.
#include "model/microbatch.h"

#include <gtest/gtest.h>

#include <vector>

namespace tokenmill::model {
namespace {

struct Flat {
  std::vector<int32_t> tokens;
  std::vector<int64_t> positions;
  int64_t rows = 0;
};

Flat flatten(const std::vector<std::vector<SequenceChunk>>& parts) {
  Flat f;
  for (const auto& part : parts) {
    EXPECT_FALSE(part.empty());
    for (const SequenceChunk& ch : part) {
      EXPECT_FALSE(ch.tokens.empty());
      for (size_t i = 0; i < ch.tokens.size(); ++i) {
        f.tokens.push_back(ch.tokens[i]);
        f.positions.push_back(ch.start_pos + static_cast<int64_t>(i));
      }
      f.rows += num_logit_rows(ch);
    }
  }
  return f;
}

TEST(Microbatch, CoversEveryTokenOnceInOrder) {
  const std::vector<int32_t> a{1, 2, 3, 4, 5, 6, 7}, b{8}, c{9, 10, 11};
  const std::vector<SequenceChunk> chunks{
      {a, 10, {}, LogitRows::kLast}, {b, 3, {}, LogitRows::kAll}, {c, 0, {}, LogitRows::kAll}};
  for (int64_t parts = 1; parts <= 14; ++parts) {
    const auto split = split_microbatches(chunks, parts);
    EXPECT_EQ(static_cast<int64_t>(split.size()), std::min<int64_t>(parts, 11)) << parts;
    const Flat f = flatten(split);
    EXPECT_EQ(f.tokens, (std::vector<int32_t>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11})) << parts;
    EXPECT_EQ(f.positions, (std::vector<int64_t>{10, 11, 12, 13, 14, 15, 16, 3, 0, 1, 2})) << parts;
    EXPECT_EQ(f.rows, 1 + 1 + 3) << parts;  // kLast: one row; kAll: one per token
    // Near-equal sizes: no micro-batch has more than one token over another.
    int64_t lo = 1 << 20, hi = 0;
    for (const auto& part : split) {
      int64_t n = 0;
      for (const SequenceChunk& ch : part) n += static_cast<int64_t>(ch.tokens.size());
      lo = std::min(lo, n);
      hi = std::max(hi, n);
    }
    EXPECT_LE(hi - lo, 1) << parts;
  }
}

TEST(Microbatch, LastRowMovesToThePartWithTheLastToken) {
  const std::vector<int32_t> a{1, 2, 3, 4};
  const std::vector<SequenceChunk> chunks{{a, 0, {}, LogitRows::kLast}};
  const auto split = split_microbatches(chunks, 2);
  ASSERT_EQ(split.size(), 2u);
  EXPECT_EQ(split[0][0].logits, LogitRows::kNone);
  EXPECT_EQ(split[1][0].logits, LogitRows::kLast);
  EXPECT_EQ(split[1][0].start_pos, 2);
}

TEST(Microbatch, NoChunksGiveOneEmptyPart) { EXPECT_EQ(split_microbatches({}, 4).size(), 1u); }

}  // namespace
}  // namespace tokenmill::model
