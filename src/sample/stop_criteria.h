// Stop strings over streamed text. Text arrives in arbitrary chunks (one
// detokenized piece per step); the matcher emits what can no longer be part of
// a stop string and holds back the rest until it is decided.
//
// Semantics (independent of how the text is chunked): the stream stops at the
// first position where some stop string ends; of the stop strings ending there
// the longest (earliest-starting) one counts, and the output is the text
// before it. The stop string itself is not emitted unless the matcher was
// built with include_stop (vLLM's include_stop_str_in_output): then the
// output ends with it. A push with may_stop false (vLLM's min_tokens not yet
// reached) cannot stop: a stop string completed by it is plain text.
//
// Thread-safety: none; one matcher per sequence. Cost per push: O(held + chunk)
// per stop string for the search, plus O(L^2) per stop string of length L for
// the hold-back; held text is always shorter than the longest stop string.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace tokenmill::sample {

struct StopResult {
  std::string emit;      // text safe to show now
  bool stopped = false;  // a stop string completed; emit is the text before it (include_stop: and it)
};

class StopStringMatcher {
 public:
  // Empty strings in `stops` are ignored (SamplingParams::validate rejects them).
  explicit StopStringMatcher(std::vector<std::string> stops, bool include_stop = false);

  // Feeds the next piece of text. After a stop every further push returns
  // {"", true} and ignores its input.
  StopResult push(std::string_view new_text, bool may_stop = true);

  // End of stream without a stop: returns the held-back text (once).
  std::string flush();

  bool stopped() const { return stopped_; }

 private:
  // Length of the longest suffix of text that is a proper prefix of a stop string.
  size_t held_suffix_length(std::string_view text) const;

  std::vector<std::string> stops_;
  std::string held_;
  bool include_stop_ = false;
  bool stopped_ = false;
};

}  // namespace tokenmill::sample
