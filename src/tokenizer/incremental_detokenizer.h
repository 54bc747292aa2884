// Streaming detokenization: turns generated token ids into text one id at a
// time without ever emitting a broken UTF-8 sequence. Bytes of a character
// split across byte tokens (emoji, CJK through <0xXX> fallback) are held back
// until the character is complete.
//
// Invariant: the concatenation of every push() and the final flush() equals
// tokenizer.decode(all ids, skip_special) whenever that is valid UTF-8; bytes
// that can never form valid UTF-8 come out as U+FFFD instead.
//
// One object per output stream; not thread-safe; the Tokenizer must outlive it.
#pragma once

#include <cstdint>
#include <string>

#include "tokenizer/tokenizer.h"

namespace tokenmill::tokenizer {

class IncrementalDetokenizer {
 public:
  // at_text_start: the ids begin a text, so the SentencePiece prefix space of
  // the first piece is dropped as decode() does. Pass false when streaming a
  // continuation of a prompt, whose first word keeps its leading space.
  explicit IncrementalDetokenizer(const Tokenizer& tokenizer, bool skip_special = true, bool at_text_start = true);

  // The newly complete text after appending id (possibly empty). Throws
  // Error for an id outside the vocabulary.
  std::string push(int32_t id);
  // The held-back bytes at the end of the stream, as U+FFFD (empty when the
  // stream ended on a character boundary). The object can be reused after.
  std::string flush();

  // Bytes currently held back (0..3).
  size_t pending_bytes() const { return pending_.size(); }

 private:
  const Tokenizer* tokenizer_;
  bool skip_special_;
  bool strip_leading_space_;
  std::string pending_;
};

}  // namespace tokenmill::tokenizer
