// Pre-tokenization for byte-level BPE: the regular expressions each model's
// Hugging Face tokenizer.json applies before BPE, selected by the GGUF key
// tokenizer.ggml.pre. A pre-tokenizer is a list of regexes applied in
// sequence: each splits every piece of the previous one into its matches and
// the unmatched runs between them (both are kept; nothing is dropped). Regexes
// are PCRE2 with UTF and UCP, so \p{L}, \p{N}, \s follow Unicode properties;
// invalid UTF-8 never matches and ends up in the runs between matches.
//
// Immutable after construction; split() is safe to call from many threads.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace tokenmill::tokenizer {

class PreTokenizer {
 public:
  // Throws Error naming `name` (and the known names) when it is not known.
  static PreTokenizer for_name(std::string_view name);
  // Compiles a custom list (tests, future models). Throws Error with the
  // PCRE2 message when a pattern does not compile.
  static PreTokenizer from_patterns(std::string name, const std::vector<std::string>& patterns,
                                    bool ignore_merges = false);
  static std::vector<std::string> known_names();

  PreTokenizer(PreTokenizer&&) noexcept;
  PreTokenizer& operator=(PreTokenizer&&) noexcept;
  ~PreTokenizer();

  const std::string& name() const { return name_; }
  // llama3: a word that is itself a token is not split by merges.
  bool ignore_merges() const { return ignore_merges_; }

  // The pieces of text, in order, as views into text; their concatenation is
  // text. Throws Error if PCRE2 gives up (resource limits).
  std::vector<std::string_view> split(std::string_view text) const;

 private:
  struct Regex;
  PreTokenizer() = default;

  std::string name_;
  bool ignore_merges_ = false;
  std::vector<std::unique_ptr<Regex>> regexes_;
};

}  // namespace tokenmill::tokenizer
