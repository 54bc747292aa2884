#include "tokenizer/incremental_detokenizer.h"

#include <gtest/gtest.h>

#include <random>

#include "tokenizer/test_util.h"
#include "tokenizer/unicode.h"

namespace tokenmill::tokenizer {
namespace {

using testing::byte_token;
using testing::spm_spec;

// 259 ▁a, 260 é, 261 b
Tokenizer small() {
  return Tokenizer::from_spec(spm_spec({{"\xE2\x96\x81"
                                         "a",
                                         -1},
                                        {"\xC3\xA9", -1},
                                        {"b", -1}}));
}

TEST(IncrementalDetokenizer, HoldsBackSplitCharacters) {
  Tokenizer t = small();
  IncrementalDetokenizer d(t);
  // U+1F999 (4 bytes) through byte fallback.
  EXPECT_EQ(d.push(byte_token(0xF0)), "");
  EXPECT_EQ(d.push(byte_token(0x9F)), "");
  EXPECT_EQ(d.push(byte_token(0xA6)), "");
  EXPECT_EQ(d.pending_bytes(), 3u);
  EXPECT_EQ(d.push(byte_token(0x99)), "\xF0\x9F\xA6\x99");
  EXPECT_EQ(d.push(261), "b");
  EXPECT_EQ(d.flush(), "");
}

TEST(IncrementalDetokenizer, InvalidBytesBecomeReplacementCharacters) {
  Tokenizer t = small();
  IncrementalDetokenizer d(t);
  EXPECT_EQ(d.push(byte_token(0xFF)), "\xEF\xBF\xBD");  // can never start a character
  EXPECT_EQ(d.push(byte_token(0xC3)), "");
  EXPECT_EQ(d.push(261),
            "\xEF\xBF\xBD"
            "b");  // a lead byte cut short
  EXPECT_EQ(d.push(byte_token(0xE2)), "");
  EXPECT_EQ(d.flush(), "\xEF\xBF\xBD");  // the stream ends mid-character
  EXPECT_EQ(d.pending_bytes(), 0u);
}

TEST(IncrementalDetokenizer, LeadingSpaceFollowsDecode) {
  Tokenizer t = small();
  IncrementalDetokenizer start(t);
  EXPECT_EQ(start.push(1), "");  // BOS is skipped and does not use up the strip
  EXPECT_EQ(start.push(259), "a");
  EXPECT_EQ(start.push(259), " a");
  IncrementalDetokenizer continuation(t, /*skip_special=*/true, /*at_text_start=*/false);
  EXPECT_EQ(continuation.push(259), " a");
  IncrementalDetokenizer with_special(t, /*skip_special=*/false);
  EXPECT_EQ(with_special.push(1), "<s>");
  EXPECT_EQ(with_special.push(259), " a");
}

TEST(IncrementalDetokenizer, RandomStreamsMatchDecode) {
  Tokenizer t = small();
  std::mt19937 rng(1234);
  // Ids that spell valid UTF-8 when taken as whole characters.
  const std::vector<std::vector<int32_t>> chars = {
      {259},
      {260},
      {261},
      {1},
      {2},
      {byte_token('x')},
      {byte_token(0xC3), byte_token(0xA9)},
      {byte_token(0xE4), byte_token(0xBD), byte_token(0xA0)},
      {byte_token(0xF0), byte_token(0x9F), byte_token(0x98), byte_token(0x81)}};
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<int32_t> ids;
    int n = static_cast<int>(rng() % 20);
    for (int i = 0; i < n; ++i) {
      const auto& c = chars[rng() % chars.size()];
      ids.insert(ids.end(), c.begin(), c.end());
    }
    IncrementalDetokenizer d(t);
    std::string joined;
    for (int32_t id : ids) {
      std::string chunk = d.push(id);
      ASSERT_TRUE(is_valid_utf8(chunk));
      joined += chunk;
    }
    joined += d.flush();
    EXPECT_EQ(joined, t.decode(ids, true));
  }
}

}  // namespace
}  // namespace tokenmill::tokenizer
