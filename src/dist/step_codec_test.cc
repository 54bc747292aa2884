// The root's step messages decode to what was encoded, and malformed ones
// (truncated, bad counts, trailing data) are refused, not trusted.
#include "dist/step_codec.h"

#include <gtest/gtest.h>

#include "util/error.h"

namespace tokenmill::dist {
namespace {

TEST(StepCodec, ForwardRoundTrips) {
  const std::vector<int32_t> t0{5, 6, 7}, t1{9};
  const std::vector<int32_t> b00{3, 4}, b01{8}, b10{1}, b11{2, 6};
  const model::ChunkTable tables0[] = {{b00, 0}, {b01, 2}};
  const model::ChunkTable tables1[] = {{b10, 0}, {b11, 1}};
  const std::vector<model::SequenceChunk> chunks{{t0, 17, tables0, model::LogitRows::kAll},
                                                 {t1, 40, tables1, model::LogitRows::kNone}};
  const std::vector<std::vector<kv::BlockCopy>> copies{{{1, 2}}, {}};
  const std::vector<uint8_t> skip{0, 1, 1, 0};
  const std::vector<int64_t> m = encode_forward(copies, chunks, skip);
  EXPECT_EQ(message_kind(m), MessageKind::kForward);
  DecodedStep d = decode_forward(m);
  DecodedStep moved = std::move(d);  // the views survive a move
  ASSERT_EQ(moved.chunks.size(), 2u);
  EXPECT_EQ(moved.copies, copies);
  EXPECT_EQ(moved.skip_layers, skip);
  for (size_t c = 0; c < 2; ++c) {
    const model::SequenceChunk& a = chunks[c];
    const model::SequenceChunk& b = moved.chunks[c];
    EXPECT_EQ(std::vector<int32_t>(a.tokens.begin(), a.tokens.end()),
              std::vector<int32_t>(b.tokens.begin(), b.tokens.end()));
    EXPECT_EQ(a.start_pos, b.start_pos);
    EXPECT_EQ(a.logits, b.logits);
    ASSERT_EQ(b.tables.size(), 2u);
    for (size_t g = 0; g < 2; ++g) {
      EXPECT_EQ(a.tables[g].first, b.tables[g].first);
      EXPECT_EQ(std::vector<int32_t>(a.tables[g].blocks.begin(), a.tables[g].blocks.end()),
                std::vector<int32_t>(b.tables[g].blocks.begin(), b.tables[g].blocks.end()));
    }
  }
}

TEST(StepCodec, PoolSizesAndStop) {
  const std::vector<int64_t> sizes{512, 96};
  EXPECT_EQ(decode_pool_sizes(encode_pool_sizes(sizes)), sizes);
  EXPECT_EQ(message_kind(encode_stop()), MessageKind::kStop);
  EXPECT_THROW(decode_forward(encode_stop()), Error);
  EXPECT_THROW(decode_pool_sizes(encode_stop()), Error);
}

TEST(StepCodec, MalformedMessagesAreRefused) {
  const std::vector<int32_t> t{5};
  const std::vector<int32_t> b{0};
  const model::ChunkTable tables[] = {{b, 0}};
  const std::vector<model::SequenceChunk> chunks{{t, 0, tables, model::LogitRows::kLast}};
  const std::vector<std::vector<kv::BlockCopy>> copies{{}};
  const std::vector<int64_t> good = encode_forward(copies, chunks, {});
  for (size_t cut = 0; cut < good.size(); ++cut) {
    const std::vector<int64_t> truncated(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(cut));
    EXPECT_THROW(decode_forward(truncated), Error) << cut;
  }
  std::vector<int64_t> trailing = good;
  trailing.push_back(0);
  EXPECT_THROW(decode_forward(trailing), Error);
  std::vector<int64_t> huge = good;
  huge[1] = int64_t{1} << 40;  // pool count beyond the message
  EXPECT_THROW(decode_forward(huge), Error);
  EXPECT_THROW(message_kind(std::vector<int64_t>{7}), Error);
}

}  // namespace
}  // namespace tokenmill::dist
