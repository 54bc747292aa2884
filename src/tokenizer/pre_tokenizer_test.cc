#include "tokenizer/pre_tokenizer.h"

#include <gtest/gtest.h>

#include "util/error.h"

namespace tokenmill::tokenizer {
namespace {

using Pieces = std::vector<std::string>;

Pieces split(std::string_view name, std::string_view text) {
  PreTokenizer pre = PreTokenizer::for_name(name);
  Pieces out;
  for (std::string_view piece : pre.split(text)) out.emplace_back(piece);
  return out;
}

TEST(PreTokenizer, Gpt2SplitsWordsNumbersSymbolsAndSpaces) {
  EXPECT_EQ(split("gpt-2", "Hello world's  123!!\n"), (Pieces{"Hello", " world", "'s", " ", " 123", "!!", "\n"}));
  EXPECT_EQ(split("gpt-2", "  Hello"), (Pieces{" ", " Hello"}));
  EXPECT_EQ(split("gpt-2", "\xC3\xA9t\xC3\xA9 \xE4\xBD\xA0\xE5\xA5\xBD"),  // été 你好
            (Pieces{"\xC3\xA9t\xC3\xA9", " \xE4\xBD\xA0\xE5\xA5\xBD"}));
}

TEST(PreTokenizer, Llama3GroupsDigitsInThreesAndFoldsContractions) {
  EXPECT_EQ(split("llama3", "12345 I'M ok\n\n"), (Pieces{"123", "45", " I", "'M", " ok", "\n\n"}));
  EXPECT_EQ(split("llama-bpe", "x...\n y"), (Pieces{"x", "...\n", " y"}));
  EXPECT_TRUE(PreTokenizer::for_name("llama3").ignore_merges());
  EXPECT_FALSE(PreTokenizer::for_name("gpt-2").ignore_merges());
}

TEST(PreTokenizer, Qwen2SplitsDigitsOneByOne) { EXPECT_EQ(split("qwen2", "a 123"), (Pieces{"a", " ", "1", "2", "3"})); }

TEST(PreTokenizer, StarcoderIsolatesEachDigitFirst) {
  EXPECT_EQ(split("starcoder", "x 42"), (Pieces{"x", " ", "4", "2"}));
}

TEST(PreTokenizer, FalconSplitsPunctuationThenGpt2ThenDigitTriples) {
  EXPECT_EQ(split("falcon", "3333333"), (Pieces{"333", "333", "3"}));
  EXPECT_EQ(split("falcon", "a+b=c"), (Pieces{"a", "+", "b", "=", "c"}));
}

TEST(PreTokenizer, DeepseekCoderSequence) {
  // Newlines alone, letters with one optional leading space, punctuation runs,
  // single digits; what no regex matches stays as its own piece.
  EXPECT_EQ(split("deepseek-coder", "ab cd\n12!?"), (Pieces{"ab", " cd", "\n", "1", "2", "!?"}));
}

TEST(PreTokenizer, DeepseekLlmSequence) {
  EXPECT_EQ(split("deepseek-llm", "Hi there, 2024\n"), (Pieces{"Hi", " there", ",", " ", "2024", "\n"}));
}

TEST(PreTokenizer, PiecesAlwaysCoverTheText) {
  const std::string text = "bad \xFF\xFE utf8 \xE2\x96 end  ";
  for (const std::string& name : PreTokenizer::known_names()) {
    PreTokenizer pre = PreTokenizer::for_name(name);
    std::string joined;
    for (std::string_view piece : pre.split(text)) {
      EXPECT_FALSE(piece.empty()) << name;
      joined.append(piece);
    }
    EXPECT_EQ(joined, text) << name;
  }
}

TEST(PreTokenizer, UnknownNameThrows) {
  EXPECT_THROW(PreTokenizer::for_name("no-such-model"), Error);
  EXPECT_THROW(PreTokenizer::from_patterns("bad", {"("}), Error);
}

}  // namespace
}  // namespace tokenmill::tokenizer
