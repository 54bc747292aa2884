#include "tokenizer/tokenizer.h"

#include <gtest/gtest.h>

#include "tokenizer/test_util.h"
#include "tokenizer/unicode.h"
#include "util/error.h"

namespace tokenmill::tokenizer {
namespace {

using testing::byte_token;
using testing::spm_spec;
using Ids = std::vector<int32_t>;

// 259 ▁, 260 a, 261 b, 262 ▁a, 263 ab, 264 <tag> (user-defined)
constexpr int32_t kSpace = 259, kA = 260, kB = 261, kSpaceA = 262, kTag = 264;

TokenizerSpec small_spm() {
  TokenizerSpec spec = spm_spec({{"\xE2\x96\x81", -1},
                                 {"a", -1},
                                 {"b", -1},
                                 {"\xE2\x96\x81"
                                  "a",
                                  -0.5f},
                                 {"ab", -2},
                                 {"<tag>", 0}});
  spec.types[kTag] = TokenType::kUserDefined;
  return spec;
}

TEST(SpmTokenizer, AddsPrefixSpaceAndBos) {
  Tokenizer t = Tokenizer::from_spec(small_spm());
  EXPECT_TRUE(t.add_bos());
  EXPECT_EQ(t.bos_id(), 1);
  EXPECT_EQ(t.eos_id(), 2);
  EXPECT_EQ(t.encode("a", false, false), (Ids{kSpaceA}));
  EXPECT_EQ(t.encode("a", true, false), (Ids{1, kSpaceA}));
  EXPECT_EQ(t.encode("b a", false, false), (Ids{kSpace, kB, kSpaceA}));
  EXPECT_TRUE(t.encode("", false, false).empty());
  EXPECT_EQ(t.encode("", true, false), (Ids{1}));
}

TEST(SpmTokenizer, ControlTokensOnlyWithParseSpecial) {
  Tokenizer t = Tokenizer::from_spec(small_spm());
  // After a special token the next text gets the prefix space again.
  EXPECT_EQ(t.encode("a</s>a", false, true), (Ids{kSpaceA, 2, kSpaceA}));
  EXPECT_EQ(t.encode("a</s>a", false, false),
            (Ids{kSpaceA, byte_token('<'), byte_token('/'), byte_token('s'), byte_token('>'), kA}));
}

TEST(SpmTokenizer, UserDefinedTokensAlwaysMatch) {
  Tokenizer t = Tokenizer::from_spec(small_spm());
  EXPECT_EQ(t.encode("a<tag>b", false, false), (Ids{kSpaceA, kTag, kSpace, kB}));
}

TEST(SpmTokenizer, WithoutPrefixSpace) {
  TokenizerSpec spec = small_spm();
  spec.add_space_prefix = false;
  Tokenizer t = Tokenizer::from_spec(spec);
  EXPECT_EQ(t.encode("a", false, false), (Ids{kA}));
  EXPECT_EQ(t.decode(Ids{kSpaceA}, true), " a");
}

TEST(SpmTokenizer, PiecesAndDecode) {
  Tokenizer t = Tokenizer::from_spec(small_spm());
  EXPECT_EQ(t.token_to_piece(kSpaceA), " a");
  EXPECT_EQ(t.token_to_piece(byte_token(0x41)), "A");
  EXPECT_EQ(t.token_to_piece(0), "");
  EXPECT_EQ(t.token_to_piece(0, true), "<unk>");
  EXPECT_EQ(t.token_to_piece(kTag), "<tag>");
  EXPECT_THROW(t.token_to_piece(t.vocab_size()), Error);
  EXPECT_THROW(t.token_to_piece(-1), Error);
  EXPECT_EQ(t.decode(Ids{kSpaceA, kSpaceA}, true), "a a");
  EXPECT_EQ(t.decode(Ids{1, kSpaceA, 2}, true), "a");
  EXPECT_EQ(t.decode(Ids{1, kSpaceA, 2}, false), "<s> a</s>");
  for (std::string s : {"a", " a", "b a  b", "a\xC3\xA9\n", "a<tag>"}) {
    EXPECT_EQ(t.decode(t.encode(s, true, false), true), s) << s;
  }
}

TEST(SpmTokenizer, EndOfGeneration) {
  TokenizerSpec spec = small_spm();
  spec.tokens.push_back("<end_of_turn>");
  spec.scores.push_back(0);
  spec.types.push_back(TokenType::kUserDefined);
  Tokenizer t = Tokenizer::from_spec(spec);
  const int32_t eot = t.vocab_size() - 1;
  EXPECT_TRUE(t.is_end_of_generation(2));
  EXPECT_TRUE(t.is_end_of_generation(eot));
  EXPECT_FALSE(t.is_end_of_generation(1));
  EXPECT_EQ(t.eot_id(), eot);
  // Forced to a control token, as llama.cpp does: plain text cannot produce it.
  EXPECT_EQ(t.token_type(eot), TokenType::kControl);
  EXPECT_EQ(t.encode("<end_of_turn>", false, true), (Ids{eot}));
  EXPECT_NE(t.encode("<end_of_turn>", false, false), (Ids{eot}));
  EXPECT_EQ(t.find_token("<end_of_turn>"), eot);
  EXPECT_EQ(t.find_token("nope"), std::nullopt);
}

TEST(SpmTokenizer, InconsistentSpecsThrow) {
  TokenizerSpec spec = small_spm();
  spec.scores.pop_back();
  EXPECT_THROW(Tokenizer::from_spec(spec), Error);
  spec = small_spm();
  spec.types.push_back(TokenType::kNormal);
  EXPECT_THROW(Tokenizer::from_spec(spec), Error);
  EXPECT_THROW(Tokenizer::from_spec(TokenizerSpec{}), Error);
}

TEST(SpmTokenizer, OutOfRangeSpecialIdsFallBack) {
  TokenizerSpec spec = small_spm();
  spec.bos_id = 1 << 20;
  spec.pad_id = 4294967295LL;
  Tokenizer t = Tokenizer::from_spec(spec);
  EXPECT_EQ(t.bos_id(), 1);
  EXPECT_EQ(t.pad_id(), kNoToken);
}

// Byte-level vocabulary: token b (0..255) is byte b; 256 Ġh, 257 Ġhi,
// 258 <|endoftext|>.
TokenizerSpec small_bpe(std::string pre = "gpt-2") {
  TokenizerSpec spec;
  spec.kind = TokenizerKind::kBpe;
  spec.pre_tokenizer = std::move(pre);
  for (int b = 0; b < 256; ++b) spec.tokens.push_back(byte_level_encode(std::string(1, static_cast<char>(b))));
  spec.tokens.push_back("\xC4\xA0h");
  spec.tokens.push_back("\xC4\xA0hi");
  spec.tokens.push_back("<|endoftext|>");
  spec.types.assign(spec.tokens.size(), TokenType::kNormal);
  spec.types.back() = TokenType::kControl;
  spec.merges = {"\xC4\xA0 h", "\xC4\xA0h i"};
  spec.eos_id = 258;
  return spec;
}

TEST(BpeTokenizer, EncodesWordsWithMerges) {
  Tokenizer t = Tokenizer::from_spec(small_bpe());
  EXPECT_FALSE(t.add_bos());
  EXPECT_EQ(t.encode(" hi there", true, false), (Ids{257, ' ', 't', 'h', 'e', 'r', 'e'}));
  EXPECT_EQ(t.encode("hi<|endoftext|>", false, true), (Ids{'h', 'i', 258}));
  EXPECT_EQ(t.encode("<|endoftext|>", false, false).size(), 13u);
  EXPECT_TRUE(t.is_end_of_generation(258));
}

TEST(BpeTokenizer, DecodeIsLossless) {
  Tokenizer t = Tokenizer::from_spec(small_bpe());
  EXPECT_EQ(t.token_to_piece(257), " hi");
  EXPECT_EQ(t.token_to_piece(258), "");
  EXPECT_EQ(t.token_to_piece(258, true), "<|endoftext|>");
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  for (std::string s : {std::string(" hi  hi\n\t x"), all}) {
    EXPECT_EQ(t.decode(t.encode(s, false, false), false), s);
  }
}

TEST(BpeTokenizer, Llama3AddsBosAndIgnoresMerges) {
  TokenizerSpec spec = small_bpe("llama3");
  spec.merges.clear();  // " hi" is still one token: it is in the vocabulary
  spec.bos_id = 258;
  Tokenizer t = Tokenizer::from_spec(spec);
  EXPECT_TRUE(t.add_bos());
  EXPECT_EQ(t.encode(" hi", true, false), (Ids{258, 257}));
}

TEST(BpeTokenizer, UnknownPreTokenizerThrows) { EXPECT_THROW(Tokenizer::from_spec(small_bpe("nonexistent")), Error); }

}  // namespace
}  // namespace tokenmill::tokenizer
