// Tokenizers loaded from GGUF metadata, behaving as llama.cpp does:
//   "llama" -> SentencePiece-style BPE over scores with byte fallback (spm.h);
//   "gpt2"  -> byte-level BPE over merges after a regex pre-tokenizer chosen
//              by tokenizer.ggml.pre (bpe.h, pre_tokenizer.h).
// Special tokens (control, unknown; and user-defined ones always) are split
// out of the text first (special_tokens.h).
//
// Differences from llama.cpp, on purpose: decode() strips the SentencePiece
// prefix space from the first non-empty piece even after a skipped BOS (so
// decode(encode(s, true, false), true) == s), and never applies llama.cpp's
// lossy "clean_spaces" post-processing.
//
// A Tokenizer is immutable after loading and safe to use from many threads.
// Loading a 262144-token vocabulary takes well under a second.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/reader.h"
#include "tokenizer/bpe.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/special_tokens.h"
#include "tokenizer/vocabulary.h"

namespace tokenmill::tokenizer {

enum class TokenizerKind { kSpm, kBpe };

// Everything a tokenizer is built from, in the GGUF keys' terms. from_gguf
// fills it from metadata; tests build it by hand.
struct TokenizerSpec {
  TokenizerKind kind = TokenizerKind::kSpm;
  std::string pre_tokenizer = "default";  // kBpe only: tokenizer.ggml.pre
  std::vector<std::string> tokens;
  std::vector<float> scores;        // empty: all 0
  std::vector<TokenType> types;     // empty: all normal
  std::vector<std::string> merges;  // kBpe: "left right", best rank first
  // Absent or out of range: llama.cpp's defaults (SPM bos 1, eos 2, unk 0;
  // BPE bos 11, eos 11) when those are in range, else none.
  std::optional<int64_t> bos_id, eos_id, unk_id, pad_id, eot_id, eom_id;
  // Absent: SPM adds BOS and a prefix space; BPE adds neither (llama3: BOS).
  std::optional<bool> add_bos, add_eos, add_space_prefix;
};

class Tokenizer {
 public:
  // False when the file carries no tokenizer (tokenizer.ggml.model absent,
  // "no_vocab" or "none", or no token list).
  static bool present_in(const gguf::GgufFile& file);
  // Throws Error naming the file and problem: no tokenizer, unsupported
  // model or pre-tokenizer, wrongly typed or inconsistent arrays.
  static Tokenizer from_gguf(const gguf::GgufFile& file);
  // Throws Error on an unsupported pre-tokenizer or inconsistent arrays.
  static Tokenizer from_spec(TokenizerSpec spec);

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  // add_special: BOS/EOS as the model asks (add_bos()/add_eos()).
  // parse_special: control and unknown token texts in `text` become those
  // tokens (user-defined token texts always do, as in llama.cpp).
  std::vector<int32_t> encode(std::string_view text, bool add_special, bool parse_special) const;

  // The raw bytes a token stands for (may be part of a UTF-8 character).
  // Control and unknown tokens give their text with `special`, else "".
  // Throws Error for an id outside the vocabulary.
  std::string token_to_piece(int32_t id, bool special = false) const;

  // The concatenated pieces; with skip_special, control and unknown tokens
  // are left out. SPM with add_space_prefix: the first non-empty piece loses
  // one leading space (the one encode() added).
  std::string decode(std::span<const int32_t> ids, bool skip_special) const;

  TokenizerKind kind() const { return kind_; }
  int32_t vocab_size() const { return vocab_.size(); }
  int32_t bos_id() const { return bos_id_; }  // kNoToken (-1) when none
  int32_t eos_id() const { return eos_id_; }
  int32_t unk_id() const { return unk_id_; }
  int32_t pad_id() const { return pad_id_; }
  int32_t eot_id() const { return eot_id_; }
  bool add_bos() const { return add_bos_; }
  bool add_eos() const { return add_eos_; }
  bool add_space_prefix() const { return add_space_prefix_; }
  // True when decode() strips a leading space at the start of a text.
  bool strips_leading_space() const { return kind_ == TokenizerKind::kSpm && add_space_prefix_; }
  const std::string& pre_tokenizer_name() const;

  // EOS, EOT, EOM and the control tokens that end a turn (<end_of_turn>,
  // <|eot_id|>, <|im_end|>, <|end|>, <|endoftext|> ...).
  bool is_end_of_generation(int32_t id) const;
  const std::vector<int32_t>& end_of_generation_ids() const { return eog_ids_; }

  std::optional<int32_t> find_token(std::string_view text) const;
  // Preconditions: 0 <= id < vocab_size().
  const std::string& token_text(int32_t id) const { return vocab_.text(id); }
  TokenType token_type(int32_t id) const { return vocab_.type(id); }

 private:
  Tokenizer() = default;
  void init_special_ids(const TokenizerSpec& spec);
  void init_end_of_generation(const TokenizerSpec& spec);
  void encode_spm(std::string_view text, const std::vector<Fragment>& fragments, std::vector<int32_t>& out) const;
  void encode_bpe(std::string_view text, const std::vector<Fragment>& fragments, std::vector<int32_t>& out) const;

  TokenizerKind kind_ = TokenizerKind::kSpm;
  Vocabulary vocab_;
  std::optional<PreTokenizer> pre_;         // kBpe only
  BpeMerges merges_;                        // kBpe only
  std::array<int32_t, 256> byte_tokens_{};  // kSpm byte fallback
  SpecialTokenMatcher user_defined_;        // matched always
  SpecialTokenMatcher all_special_;         // matched with parse_special
  int32_t bos_id_ = kNoToken, eos_id_ = kNoToken, unk_id_ = kNoToken;
  int32_t pad_id_ = kNoToken, eot_id_ = kNoToken, eom_id_ = kNoToken;
  bool add_bos_ = false, add_eos_ = false, add_space_prefix_ = false;
  std::vector<int32_t> eog_ids_;  // sorted
};

}  // namespace tokenmill::tokenizer
