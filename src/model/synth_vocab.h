// Tokenizer tables written into generated GGUF files: the built-in
// SentencePiece-style vocabulary of synthetic models, the tokenizer.* keys
// of a "llama" (SPM) vocabulary, and copying a vocabulary from another GGUF.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gguf/reader.h"
#include "gguf/writer.h"

namespace tokenmill::model {

// GGUF token types (tokenizer.ggml.token_type).
inline constexpr int32_t kTokenNormal = 1;
inline constexpr int32_t kTokenUnknown = 2;
inline constexpr int32_t kTokenControl = 3;
inline constexpr int32_t kTokenUnused = 5;
inline constexpr int32_t kTokenByte = 6;

// SentencePiece's word-boundary marker U+2581, which stands for a space.
inline constexpr std::string_view kSpaceMarker = "\xE2\x96\x81";

struct VocabTables {
  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<int32_t> types;
};

// <unk>, <s>, </s> and the 256 byte tokens: the least a built-in vocabulary
// needs so that any text round-trips through byte fallback.
inline constexpr int64_t kMinBuiltinVocab = 3 + 256;

// A deterministic SPM-style vocabulary of exactly `size` tokens: <unk>=0,
// <s>=1, </s>=2 (control), <0x00>..<0xFF> (byte), then "▁", printable ASCII
// characters, "▁"-prefixed common English words, common subwords and letter
// n-grams, with decreasing scores. Every multi-character piece has its
// prefix one character shorter in the table, so the SPM merge loop can build
// it from characters. Past the generated pieces, <extra_N> unused tokens pad
// the table. Throws Error when size < kMinBuiltinVocab.
VocabTables builtin_vocab(int64_t size);

// Writes tokenizer.ggml.{model="llama", tokens, scores, token_type} and the
// SPM defaults (bos 1, eos 2, unknown 0, add_bos_token, add_space_prefix).
void set_spm_tokenizer_keys(gguf::GgufWriter& writer, const VocabTables& vocab);

// A GPT-2-style byte-level BPE vocabulary (tokenizer.ggml.model "gpt2", as
// Qwen, OLMo 2 and Granite ship): tokens are strings over GPT-2's byte-to-
// unicode alphabet, each merge "a b" makes the token a+b.
struct BpeVocab {
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  std::vector<std::string> merges;  // in rank order
  int32_t eos_id = 0;               // the first special token; also bos
};

// A deterministic BPE vocabulary of exactly `size` tokens: the 256 byte
// symbols (byte b is GPT-2's printable stand-in for b), then the merges that
// build " word" pieces for common English words, common subwords and letter
// n-grams, each through its one-symbol-shorter prefix, and last the control
// tokens `specials`. Throws Error when size < 256 + specials.size().
BpeVocab builtin_bpe_vocab(int64_t size, const std::vector<std::string>& specials);

// Writes tokenizer.ggml.{model="gpt2", pre, tokens, token_type, merges} with
// bos = eos = the first special token and add_bos_token false.
void set_bpe_tokenizer_keys(gguf::GgufWriter& writer, const BpeVocab& vocab, const std::string& pre);

// Copies every tokenizer.* key of `from` into `to` and returns the number of
// tokens. Throws Error naming the file when it has no tokenizer.ggml.tokens
// string array.
int64_t copy_tokenizer_keys(const gguf::GgufFile& from, gguf::GgufWriter& to);

}  // namespace tokenmill::model
