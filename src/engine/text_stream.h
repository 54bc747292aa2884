// A request's output as text: sampled ids in, text that is safe to show out.
// The incremental detokenizer (whole UTF-8 characters only; a continuation
// of the prompt, so its first word keeps its leading space) feeds the
// stop-string matcher (text that may begin a stop string is held back until
// it is decided; a completed stop string and everything after it is never
// shown, unless include_stop_str keeps the stop string). The one place ids
// become text for every generation path: `tokenmill run`, the server and
// the benchmarks all read it through the engine's events.
//
// Thread-safety: none; one per request.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sample/stop_criteria.h"
#include "tokenizer/incremental_detokenizer.h"
#include "tokenizer/tokenizer.h"

namespace tokenmill::engine {

// How ids become text (vLLM's names, SamplingParams carries them).
struct TextOptions {
  // Control and unknown tokens (<s>, <|im_end|>, ...) add no text; false:
  // their text is shown.
  bool skip_special_tokens = true;
  // With skip_special_tokens false: a special token's text is set apart by
  // one space from the text before and after it ("a <s> b", "<s> <s>").
  bool spaces_between_special_tokens = true;
  // The stop string that ends the output stays in it.
  bool include_stop_str = false;
  // Stop strings end the output only from this many pushed tokens on.
  int min_tokens = 0;
};

class TextStream {
 public:
  // `tokenizer` must outlive the stream.
  TextStream(const tokenizer::Tokenizer& tokenizer, std::vector<std::string> stops, TextOptions options = {});

  struct Piece {
    std::string text;      // newly decided text (may be empty)
    bool stopped = false;  // a stop string completed; text is what came before it
  };
  // The next sampled id. After a stop every push returns {"", true}.
  Piece push(int32_t id);
  // The text still held back when generation ends without a stop string (an
  // unfinished stop-string prefix, an incomplete UTF-8 tail as U+FFFD);
  // empty after a stop. Once.
  std::string finish();
  bool stopped() const { return stops_.stopped(); }

 private:
  // The detokenized text of id, with the spaces around special tokens.
  std::string detokenize(int32_t id);

  const tokenizer::Tokenizer* tokenizer_;
  TextOptions options_;
  tokenizer::IncrementalDetokenizer detok_;
  sample::StopStringMatcher stops_;
  int num_pushed_ = 0;
  bool any_text_ = false;      // some text came out of the detokenizer
  bool last_special_ = false;  // the last token with text was a special token
};

}  // namespace tokenmill::engine
