#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer/pre_tokenizer.h"

#include <pcre2.h>

#include <utility>

#include "tokenizer/unicode.h"
#include "util/error.h"

namespace tokenmill::tokenizer {
namespace {

// The GPT-2 pattern (contractions, letters, numbers, other symbols, spaces).
constexpr const char* kGpt2 = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
// Llama 3 / cl100k. The case-insensitive contractions are spelt out with
// classes so that Unicode case folding (e.g. U+017F for s) does not apply.
constexpr const char* kLlama3 =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Qwen2: as Llama 3 but digits one at a time.
constexpr const char* kQwen2 =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Cased letters as listed in DeepSeek LLM's tokenizer.json.
constexpr const char* kDeepseekLlmLetters =
    "\\s?[A-Za-z\xC2\xB5\xC3\x80-\xC3\x96\xC3\x98-\xC3\xB6\xC3\xB8-\xC6\xBA\xC6\xBC-\xC6\xBF"
    "\xC7\x84-\xCA\x93\xCA\x95-\xCA\xAF\xCD\xB0-\xCD\xB3\xCD\xB6\xCD\xB7\xCD\xBB-\xCD\xBD\xCD\xBF"
    "\xCE\x86\xCE\x88-\xCE\x8A\xCE\x8C\xCE\x8E-\xCE\xA1\xCE\xA3-\xCF\xB5\xCF\xB7-\xD2\x81"
    "\xD2\x8A-\xD4\xAF\xD4\xB1-\xD5\x96\xE1\x82\xA0-\xE1\x83\x85\xE1\x8E\xA0-\xE1\x8F\xB5"
    "\xE1\x8F\xB8-\xE1\x8F\xBD\xE1\xB2\x90-\xE1\xB2\xBA\xE1\xB2\xBD-\xE1\xB2\xBF\xE1\xB4\x80-\xE1\xB4\xAB"
    "\xE1\xB5\xAB-\xE1\xB5\xB7\xE1\xB5\xB9-\xE1\xB6\x9A\xE1\xB8\x80-\xE1\xBC\x95\xE1\xBC\x98-\xE1\xBC\x9D"
    "\xE1\xBC\xA0-\xE1\xBD\x85\xE1\xBD\x88-\xE1\xBD\x8D\xE1\xBD\x90-\xE1\xBD\x97\xE1\xBD\x99\xE1\xBD\x9B"
    "\xE1\xBD\x9D\xE1\xBD\x9F-\xE1\xBD\xBD\xE1\xBE\x80-\xE1\xBE\xB4\xE1\xBE\xB6-\xE1\xBE\xBC\xE1\xBE\xBE"
    "\xE1\xBF\x82-\xE1\xBF\x84\xE1\xBF\x86-\xE1\xBF\x8C\xE1\xBF\x90-\xE1\xBF\x93\xE1\xBF\x96-\xE1\xBF\x9B"
    "\xE1\xBF\xA0-\xE1\xBF\xAC\xE1\xBF\xB2-\xE1\xBF\xB4\xE1\xBF\xB6-\xE1\xBF\xBC\xE2\x84\x82\xE2\x84\x87"
    "\xE2\x84\x8A-\xE2\x84\x93\xE2\x84\x95\xE2\x84\x99-\xE2\x84\x9D\xE2\x84\xA4\xE2\x84\xA6\xE2\x84\xA8"
    "\xE2\x84\xAA-\xE2\x84\xAD\xE2\x84\xAF-\xE2\x84\xB4\xE2\x84\xB9\xE2\x84\xBC-\xE2\x84\xBF"
    "\xE2\x85\x85-\xE2\x85\x89\xE2\x85\x8E\xE2\x86\x83\xE2\x86\x84\xE2\xB0\x80-\xE2\xB1\xBB"
    "\xE2\xB1\xBE-\xE2\xB3\xA4\xE2\xB3\xAB-\xE2\xB3\xAE\xE2\xB3\xB2\xE2\xB3\xB3\xEA\x99\x80-\xEA\x99\xAD"
    "\xEA\x9A\x80-\xEA\x9A\x9B\xEA\x9C\xA2-\xEA\x9D\xAF\xEA\x9D\xB1-\xEA\x9E\x87\xEA\x9E\x8B-\xEA\x9E\x8E"
    "\xEA\xAD\xB0-\xEA\xAE\xBF\xEF\xAC\x80-\xEF\xAC\x86\xEF\xAC\x93-\xEF\xAC\x97\xEF\xBC\xA1-\xEF\xBC\xBA"
    "\xEF\xBD\x81-\xEF\xBD\x9A\\x{10400}-\\x{1044F}\\x{104B0}-\\x{104D3}\\x{104D8}-\\x{104FB}"
    "\\x{10C80}-\\x{10CB2}\\x{10CC0}-\\x{10CF2}\\x{118A0}-\\x{118DF}\\x{1E900}-\\x{1E943}]+";
// ASCII and full-width punctuation, general punctuation quotes, CJK symbols.
constexpr const char* kDeepseekLlmPunct =
    "\\s?[!-/:-~\\x{FF01}-\\x{FF0F}\\x{FF1A}-\\x{FF5E}\\x{2018}-\\x{201F}\\x{3000}-\\x{3002}]+";
// CJK unified ideographs, Samaritan..CJK, Hangul syllables.
constexpr const char* kCjk = "[\\x{4E00}-\\x{9FA5}\\x{0800}-\\x{4E00}\\x{AC00}-\\x{D7FF}]+";

struct Known {
  std::vector<std::string_view> names;
  std::vector<std::string> patterns;
  bool ignore_merges = false;
};

const std::vector<Known>& known_pre_tokenizers() {
  static const std::vector<Known> kKnown = {
      {{"default"}, {R"([\p{P}\$\+<=>\^~\|]+)", kGpt2, R"(\p{N}+)", "[0-9][0-9][0-9]"}},
      {{"gpt-2", "gpt2", "mpt", "olmo", "phi-2", "jais"}, {kGpt2}},
      {{"llama3", "llama-v3", "llama-bpe"}, {kLlama3}, true},
      {{"dbrx", "smaug-bpe"}, {kLlama3}},
      {{"qwen2", "deepseek-r1-qwen", "stablelm2"}, {kQwen2}},
      {{"falcon"}, {R"([\p{P}\$\+<=>\^~\|`]+)", kGpt2, "[0-9][0-9][0-9]"}},
      {{"starcoder", "refact", "command-r", "smollm", "codeshell"}, {R"(\p{N})", kGpt2}},
      {{"deepseek-coder"}, {"[\r\n]", R"(\s?\p{L}+)", R"(\s?\p{P}+)", kCjk, R"(\p{N})"}},
      {{"deepseek-llm"}, {"[\r\n]", kDeepseekLlmLetters, kDeepseekLlmPunct, R"(\s+$)", kCjk, R"(\p{N}+)"}},
  };
  return kKnown;
}

// Adds [begin, end) of the subject to pieces when it is not empty.
void add_piece(std::vector<std::pair<size_t, size_t>>& pieces, size_t begin, size_t end) {
  if (end > begin) pieces.emplace_back(begin, end);
}

}  // namespace

struct PreTokenizer::Regex {
  pcre2_code* code = nullptr;
  ~Regex() { pcre2_code_free(code); }

  // Splits text[begin, end) into matches and the runs between them.
  void split(std::string_view text, size_t begin, size_t end, std::vector<std::pair<size_t, size_t>>& out) const;
};

void PreTokenizer::Regex::split(std::string_view text, size_t begin, size_t end,
                                std::vector<std::pair<size_t, size_t>>& out) const {
  std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> data(
      pcre2_match_data_create_from_pattern(code, nullptr), &pcre2_match_data_free);
  // Matching sees only this piece, so lookaheads and $ stop at its end.
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data() + begin);
  const size_t length = end - begin;
  size_t pos = 0;
  size_t last_end = 0;
  while (pos < length) {
    int rc = pcre2_match(code, subject, length, pos, 0, data.get(), nullptr);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {  // deep backtracking: the interpreter uses the heap
      rc = pcre2_match(code, subject, length, pos, PCRE2_NO_JIT, data.get(), nullptr);
    }
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(rc, message, sizeof message);
      fail("pre-tokenizer regex failed on a {}-byte piece: {}", length, reinterpret_cast<const char*>(message));
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(data.get());
    const size_t match_begin = ov[0];
    const size_t match_end = ov[1];
    if (match_end == match_begin) {  // empty match: step over one character
      pos = match_begin + utf8_char_length(static_cast<uint8_t>(text[begin + match_begin]));
      continue;
    }
    add_piece(out, begin + last_end, begin + match_begin);
    add_piece(out, begin + match_begin, begin + match_end);
    last_end = pos = match_end;
  }
  add_piece(out, begin + last_end, end);
}

PreTokenizer::PreTokenizer(PreTokenizer&&) noexcept = default;
PreTokenizer& PreTokenizer::operator=(PreTokenizer&&) noexcept = default;
PreTokenizer::~PreTokenizer() = default;

PreTokenizer PreTokenizer::from_patterns(std::string name, const std::vector<std::string>& patterns,
                                         bool ignore_merges) {
  PreTokenizer pre;
  pre.name_ = std::move(name);
  pre.ignore_merges_ = ignore_merges;
  const uint32_t options = PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF | PCRE2_DOLLAR_ENDONLY;
  for (const std::string& pattern : patterns) {
    int error = 0;
    PCRE2_SIZE offset = 0;
    auto regex = std::make_unique<Regex>();
    regex->code =
        pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), options, &error, &offset, nullptr);
    if (regex->code == nullptr) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(error, message, sizeof message);
      fail("pre-tokenizer '{}': regex /{}/ does not compile at offset {}: {}", pre.name_, pattern, offset,
           reinterpret_cast<const char*>(message));
    }
    pcre2_jit_compile(regex->code, PCRE2_JIT_COMPLETE);  // optional: falls back to the interpreter
    pre.regexes_.push_back(std::move(regex));
  }
  return pre;
}

PreTokenizer PreTokenizer::for_name(std::string_view name) {
  for (const Known& known : known_pre_tokenizers()) {
    for (std::string_view n : known.names) {
      if (n == name) return from_patterns(std::string(name), known.patterns, known.ignore_merges);
    }
  }
  fail("unknown pre-tokenizer '{}' (tokenizer.ggml.pre); known: {}", name, fmt::join(known_names(), ", "));
}

std::vector<std::string> PreTokenizer::known_names() {
  std::vector<std::string> names;
  for (const Known& known : known_pre_tokenizers()) {
    for (std::string_view n : known.names) names.emplace_back(n);
  }
  return names;
}

std::vector<std::string_view> PreTokenizer::split(std::string_view text) const {
  std::vector<std::pair<size_t, size_t>> pieces;
  add_piece(pieces, 0, text.size());
  std::vector<std::pair<size_t, size_t>> next;
  for (const auto& regex : regexes_) {
    next.clear();
    for (auto [begin, end] : pieces) regex->split(text, begin, end, next);
    pieces.swap(next);
  }
  std::vector<std::string_view> views;
  views.reserve(pieces.size());
  for (auto [begin, end] : pieces) views.push_back(text.substr(begin, end - begin));
  return views;
}

}  // namespace tokenmill::tokenizer
