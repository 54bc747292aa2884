// TextStream on the tiny synthetic model's SentencePiece vocabulary: the
// pieces of a continuation concatenate to its decoded text (leading space
// kept), a stop string ends the text before it however it is split across
// tokens, and finish() releases what was held back.
#include "engine/text_stream.h"

#include <gtest/gtest.h>

#include "engine/test_util.h"
#include "gguf/reader.h"

namespace tokenmill::engine {
namespace {

class TextStreamTest : public ::testing::Test {
 protected:
  TextStreamTest()
      : file_(gguf::GgufFile::open(testing::tiny_model_path())), tok_(tokenizer::Tokenizer::from_gguf(file_)) {}

  // ids of " text" as it continues a prompt.
  std::vector<int32_t> ids(const std::string& text) const { return tok_.encode(text, false, false); }

  gguf::GgufFile file_;
  tokenizer::Tokenizer tok_;
};

TEST_F(TextStreamTest, PiecesConcatenateToTheContinuation) {
  const std::vector<int32_t> out = ids("Once upon a time there was a dog");
  TextStream stream(tok_, {});
  std::string text;
  for (int32_t id : out) {
    const TextStream::Piece p = stream.push(id);
    EXPECT_FALSE(p.stopped);
    text += p.text;
  }
  text += stream.finish();
  // A continuation keeps the first word's leading space, which decode()
  // of a whole text drops.
  EXPECT_EQ(text, " " + tok_.decode(out, true));
}

TEST_F(TextStreamTest, StopStringEndsTheTextBeforeIt) {
  const std::vector<int32_t> out = ids("Once upon a time there was a dog");
  TextStream stream(tok_, {"time th"});
  std::string text;
  bool stopped = false;
  size_t pushed = 0;
  for (int32_t id : out) {
    const TextStream::Piece p = stream.push(id);
    text += p.text;
    ++pushed;
    if ((stopped = p.stopped)) break;
  }
  EXPECT_TRUE(stopped);
  EXPECT_TRUE(stream.stopped());
  EXPECT_EQ(text, " Once upon a ");
  EXPECT_LT(pushed, out.size());
  EXPECT_EQ(stream.finish(), "");
  EXPECT_TRUE(stream.push(out.back()).stopped);
}

TEST_F(TextStreamTest, FinishReleasesAnUnfinishedStopPrefix) {
  const std::vector<int32_t> out = ids("Once upon a");
  TextStream stream(tok_, {"a time"});
  std::string text;
  for (int32_t id : out) text += stream.push(id).text;
  EXPECT_EQ(text, " Once upon ");  // "a" may begin the stop string: held
  EXPECT_EQ(stream.finish(), "a");
  EXPECT_FALSE(stream.stopped());
}

TEST_F(TextStreamTest, SpecialTokensShownWithSpacesBetween) {
  const int32_t bos = tok_.bos_id();
  const std::vector<int32_t> word = ids("dog");
  auto render = [&](TextOptions o) {
    TextStream stream(tok_, {}, o);
    std::string text;
    for (int32_t id : {bos, bos}) text += stream.push(id).text;
    for (int32_t id : word) text += stream.push(id).text;
    text += stream.push(bos).text;
    return text + stream.finish();
  };
  const std::string bos_text = tok_.token_text(bos);
  EXPECT_EQ(render({}), " dog");  // skipped, as by default
  EXPECT_EQ(render({.skip_special_tokens = false}), bos_text + " " + bos_text + "  dog " + bos_text);
  EXPECT_EQ(render({.skip_special_tokens = false, .spaces_between_special_tokens = false}),
            bos_text + bos_text + " dog" + bos_text);
}

TEST_F(TextStreamTest, MinTokensAndIncludeStopStr) {
  const std::vector<int32_t> out = ids("Once upon a time there was a dog");
  auto run = [&](TextOptions o) {
    TextStream stream(tok_, {"a"}, o);
    std::string text;
    for (int32_t id : out) {
      const TextStream::Piece p = stream.push(id);
      text += p.text;
      if (p.stopped) return text;
    }
    return text + stream.finish();
  };
  const std::string full = " Once upon a time there was a dog";
  EXPECT_EQ(run({}), " Once upon ");
  EXPECT_EQ(run({.include_stop_str = true}), " Once upon a");
  // The "a" completed before min_tokens does not stop; the next one does.
  const size_t second_a = full.find('a', full.find(" a ") + 2);
  EXPECT_EQ(run({.min_tokens = 4}), full.substr(0, second_a));
  EXPECT_EQ(run({.min_tokens = 100}), full);
}

}  // namespace
}  // namespace tokenmill::engine
