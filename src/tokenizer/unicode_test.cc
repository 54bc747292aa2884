#include "tokenizer/unicode.h"

#include <gtest/gtest.h>

namespace tokenmill::tokenizer {
namespace {

TEST(ByteLevel, KnownMappings) {
  // The GPT-2 alphabet: printable bytes map to themselves, the others to
  // U+0100 + their index among the non-printable bytes.
  EXPECT_EQ(byte_to_unicode('A'), U'A');
  EXPECT_EQ(byte_to_unicode(0x00), 0x100u);
  EXPECT_EQ(byte_to_unicode('\n'), 0x10Au);  // "Ċ"
  EXPECT_EQ(byte_to_unicode(' '), 0x120u);   // "Ġ"
  EXPECT_EQ(byte_to_unicode(0x7F), 0x121u);
  EXPECT_EQ(byte_to_unicode(0xA0), 0x142u);
  EXPECT_EQ(byte_to_unicode(0xAD), 0x143u);
  EXPECT_EQ(byte_to_unicode(0xA1), 0xA1u);
  EXPECT_EQ(byte_level_encode(" hi\n"), "\xC4\xA0hi\xC4\x8A");
}

TEST(ByteLevel, RoundTripsEveryByte) {
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  std::string encoded = byte_level_encode(all);
  EXPECT_TRUE(is_valid_utf8(encoded));
  EXPECT_EQ(byte_level_decode(encoded), all);
}

TEST(ByteLevel, DecodeKeepsCodePointsOutsideTheAlphabet) {
  EXPECT_EQ(byte_level_decode("\xE2\x96\x81x"), "\xE2\x96\x81x");  // U+2581 is not in it
}

TEST(Utf8, CheckSequence) {
  EXPECT_EQ(utf8_check_sequence("a"), 1);
  EXPECT_EQ(utf8_check_sequence("\xC3\xA9"), 2);
  EXPECT_EQ(utf8_check_sequence("\xF0\x9F\xA6\x99"), 4);
  EXPECT_EQ(utf8_check_sequence("\xF0\x9F\xA6"), 0);       // incomplete
  EXPECT_EQ(utf8_check_sequence("\x80"), -1);              // stray continuation
  EXPECT_EQ(utf8_check_sequence("\xC0\x80"), -1);          // overlong lead
  EXPECT_EQ(utf8_check_sequence("\xE0\x80\x80"), -1);      // overlong
  EXPECT_EQ(utf8_check_sequence("\xED\xA0\x80"), -1);      // surrogate
  EXPECT_EQ(utf8_check_sequence("\xF4\x90\x80\x80"), -1);  // above U+10FFFF
  EXPECT_EQ(utf8_check_sequence("\xE2\x96x"), -2);         // broken after two bytes
}

TEST(Utf8, AppendCompleteHoldsBackIncompleteTail) {
  std::string out;
  EXPECT_EQ(append_complete_utf8("ab\xF0\x9F\xA6", false, out), 2u);
  EXPECT_EQ(out, "ab");
  out.clear();
  EXPECT_EQ(append_complete_utf8("ab\xF0\x9F\xA6", true, out), 5u);
  EXPECT_EQ(out, "ab\xEF\xBF\xBD");
  out.clear();
  EXPECT_EQ(append_complete_utf8("\x80z", false, out), 2u);
  EXPECT_EQ(out, "\xEF\xBF\xBDz");
}

TEST(Utf8, CharLengthFollowsTheLeadByte) {
  EXPECT_EQ(utf8_char_length('a'), 1u);
  EXPECT_EQ(utf8_char_length(0x80), 1u);
  EXPECT_EQ(utf8_char_length(0xC3), 2u);
  EXPECT_EQ(utf8_char_length(0xE2), 3u);
  EXPECT_EQ(utf8_char_length(0xF0), 4u);
}

TEST(Spm, EscapeAndUnescapeSpaces) {
  EXPECT_EQ(spm_escape_spaces(" a  b"),
            "\xE2\x96\x81"
            "a\xE2\x96\x81\xE2\x96\x81"
            "b");
  EXPECT_EQ(spm_unescape_spaces("\xE2\x96\x81"
                                "a\xE2\x96\x81"),
            " a ");
}

}  // namespace
}  // namespace tokenmill::tokenizer
