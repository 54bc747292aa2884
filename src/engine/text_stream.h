// A request's output as text: sampled ids in, text that is safe to show out.
// The incremental detokenizer (whole UTF-8 characters only; a continuation
// of the prompt, so its first word keeps its leading space) feeds the
// stop-string matcher (text that may begin a stop string is held back until
// it is decided; a completed stop string and everything after it is never
// shown). The one place ids become text for every generation path:
// `tokenmill run`, the server and the benchmarks all read it through the
// engine's events.
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

class TextStream {
 public:
  // `tokenizer` must outlive the stream.
  TextStream(const tokenizer::Tokenizer& tokenizer, std::vector<std::string> stops);

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
  tokenizer::IncrementalDetokenizer detok_;
  sample::StopStringMatcher stops_;
};

}  // namespace tokenmill::engine
