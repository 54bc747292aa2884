#include "tokenizer/tokenizer.h"

#include <algorithm>

#include "tokenizer/spm.h"
#include "tokenizer/unicode.h"
#include "util/error.h"

namespace tokenmill::tokenizer {
namespace {

// Texts llama.cpp takes as end-of-turn tokens when the file names none, in
// order of preference.
constexpr std::string_view kEotTexts[] = {"<|eot_id|>",
                                          "<|im_end|>",
                                          "<|end|>",
                                          "<end_of_turn>",
                                          "<|endoftext|>",
                                          "<EOT>",
                                          "_<EOT>",
                                          "<\xEF\xBD\x9C"
                                          "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>"};
// Texts that end generation wherever they occur in a vocabulary.
constexpr std::string_view kEogTexts[] = {"<|eot_id|>",      "<|im_end|>",        "<|end|>", "<end_of_turn>",
                                          "<|endoftext|>",   "<|eom_id|>",        "<EOT>",   "_<EOT>",
                                          "<|end_of_text|>", "<end_of_utterance>"};

int32_t resolve_id(const std::optional<int64_t>& given, int32_t fallback, int32_t num_tokens) {
  if (given && *given >= 0 && *given < num_tokens) return static_cast<int32_t>(*given);
  return fallback >= 0 && fallback < num_tokens ? fallback : kNoToken;
}

// The byte of a SentencePiece byte token "<0xAB>", or -1.
int parse_byte_token(std::string_view text) {
  if (text.size() != 6 || text.substr(0, 3) != "<0x" || text[5] != '>') return -1;
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  int hi = hex(text[3]), lo = hex(text[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

void check_spec(const TokenizerSpec& spec) {
  const size_t n = spec.tokens.size();
  if (n == 0) fail("tokenizer has an empty token list");
  if (n > static_cast<size_t>(INT32_MAX)) fail("tokenizer has too many tokens ({})", n);
  if (!spec.scores.empty() && spec.scores.size() != n) {
    fail("tokenizer has {} scores for {} tokens", spec.scores.size(), n);
  }
  if (!spec.types.empty() && spec.types.size() != n) {
    fail("tokenizer has {} token types for {} tokens", spec.types.size(), n);
  }
}

}  // namespace

Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

Tokenizer Tokenizer::from_spec(TokenizerSpec spec) {
  check_spec(spec);
  Tokenizer t;
  t.kind_ = spec.kind;
  if (spec.kind == TokenizerKind::kBpe) {
    t.pre_.emplace(PreTokenizer::for_name(spec.pre_tokenizer));
    t.merges_ = BpeMerges(spec.merges);
  }
  t.vocab_ = Vocabulary(std::move(spec.tokens), std::move(spec.scores), std::move(spec.types));
  t.init_special_ids(spec);
  t.init_end_of_generation(spec);
  if (t.kind_ == TokenizerKind::kSpm) t.byte_tokens_ = spm_byte_tokens(t.vocab_, t.unk_id_);

  std::vector<int32_t> user_defined, all_special;
  for (int32_t id = 0; id < t.vocab_.size(); ++id) {
    TokenType type = t.vocab_.type(id);
    if (type == TokenType::kUserDefined) user_defined.push_back(id);
    if (type == TokenType::kUserDefined || type == TokenType::kControl || type == TokenType::kUnknown) {
      all_special.push_back(id);
    }
  }
  t.user_defined_ = SpecialTokenMatcher(t.vocab_, std::move(user_defined));
  t.all_special_ = SpecialTokenMatcher(t.vocab_, std::move(all_special));
  return t;
}

void Tokenizer::init_special_ids(const TokenizerSpec& spec) {
  const int32_t n = vocab_.size();
  const bool spm = kind_ == TokenizerKind::kSpm;
  bos_id_ = resolve_id(spec.bos_id, spm ? 1 : 11, n);
  eos_id_ = resolve_id(spec.eos_id, spm ? 2 : 11, n);
  unk_id_ = resolve_id(spec.unk_id, spm ? 0 : kNoToken, n);
  pad_id_ = resolve_id(spec.pad_id, kNoToken, n);
  eot_id_ = resolve_id(spec.eot_id, kNoToken, n);
  eom_id_ = resolve_id(spec.eom_id, kNoToken, n);
  const bool llama3 = !spm && pre_->ignore_merges();
  add_bos_ = spec.add_bos.value_or(spm || llama3);
  add_eos_ = spec.add_eos.value_or(false);
  add_space_prefix_ = spec.add_space_prefix.value_or(spm);
  if (eot_id_ == kNoToken) {
    for (std::string_view text : kEotTexts) {
      if (int32_t id = vocab_.find(text); id != kNoToken) {
        eot_id_ = id;
        break;
      }
    }
  }
}

void Tokenizer::init_end_of_generation(const TokenizerSpec&) {
  for (int32_t id : {eos_id_, eot_id_, eom_id_}) {
    if (id != kNoToken) eog_ids_.push_back(id);
  }
  for (std::string_view text : kEogTexts) {
    int32_t id = vocab_.find(text);
    if (id == kNoToken) continue;
    eog_ids_.push_back(id);
    // As in llama.cpp, end-of-turn tokens found by their text are control
    // tokens even when the file says otherwise, so plain text never gives them.
    vocab_.set_type(id, TokenType::kControl);
  }
  std::sort(eog_ids_.begin(), eog_ids_.end());
  eog_ids_.erase(std::unique(eog_ids_.begin(), eog_ids_.end()), eog_ids_.end());
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special, bool parse_special) const {
  const std::vector<Fragment> fragments = parse_special ? all_special_.split(text) : user_defined_.split(text);
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 2);
  if (add_special && add_bos_ && bos_id_ != kNoToken) out.push_back(bos_id_);
  if (kind_ == TokenizerKind::kSpm) {
    encode_spm(text, fragments, out);
  } else {
    encode_bpe(text, fragments, out);
  }
  if (add_special && add_eos_ && eos_id_ != kNoToken) out.push_back(eos_id_);
  return out;
}

void Tokenizer::encode_spm(std::string_view text, const std::vector<Fragment>& fragments,
                           std::vector<int32_t>& out) const {
  // The prefix space goes before the text and after every special token.
  bool after_special = true;
  for (const Fragment& f : fragments) {
    if (f.token != kNoToken) {
      out.push_back(f.token);
      after_special = true;
      continue;
    }
    std::string raw;
    if (add_space_prefix_ && after_special) raw.push_back(' ');
    raw.append(text.substr(f.begin, f.end - f.begin));
    spm_tokenize(vocab_, byte_tokens_, spm_escape_spaces(raw), out);
    after_special = false;
  }
}

void Tokenizer::encode_bpe(std::string_view text, const std::vector<Fragment>& fragments,
                           std::vector<int32_t>& out) const {
  for (const Fragment& f : fragments) {
    if (f.token != kNoToken) {
      out.push_back(f.token);
      continue;
    }
    for (std::string_view word : pre_->split(text.substr(f.begin, f.end - f.begin))) {
      bpe_tokenize_word(vocab_, merges_, byte_level_encode(word), pre_->ignore_merges(), out);
    }
  }
}

std::string Tokenizer::token_to_piece(int32_t id, bool special) const {
  if (!vocab_.contains(id)) {
    fail("token id {} is outside the vocabulary (0..{})", id, vocab_.size() - 1);
  }
  const std::string& text = vocab_.text(id);
  switch (vocab_.type(id)) {
    case TokenType::kControl:
    case TokenType::kUnknown: return special ? text : std::string();
    case TokenType::kUserDefined: return text;
    case TokenType::kNormal: return kind_ == TokenizerKind::kSpm ? spm_unescape_spaces(text) : byte_level_decode(text);
    case TokenType::kByte:
      if (kind_ == TokenizerKind::kBpe) return byte_level_decode(text);
      if (int byte = parse_byte_token(text); byte >= 0) return std::string(1, static_cast<char>(byte));
      return std::string();
    default:  // unused and undefined tokens stand for no text
      return std::string();
  }
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special) const {
  std::string out;
  bool strip = strips_leading_space();
  for (int32_t id : ids) {
    std::string piece = token_to_piece(id, !skip_special);
    if (strip && !piece.empty()) {
      if (piece[0] == ' ') piece.erase(0, 1);
      strip = false;
    }
    out += piece;
  }
  return out;
}

const std::string& Tokenizer::pre_tokenizer_name() const {
  static const std::string kNone;
  return pre_ ? pre_->name() : kNone;
}

bool Tokenizer::is_end_of_generation(int32_t id) const {
  return std::binary_search(eog_ids_.begin(), eog_ids_.end(), id);
}

std::optional<int32_t> Tokenizer::find_token(std::string_view text) const {
  int32_t id = vocab_.find(text);
  if (id == kNoToken) return std::nullopt;
  return id;
}

}  // namespace tokenmill::tokenizer
