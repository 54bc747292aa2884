// Import of llama2.c checkpoints (Karpathy's "legacy" float32 format, e.g.
// the tinyllamas stories*.bin models) and tokenizer.bin files into GGUF.
//
// Checkpoint: 7 int32 {dim, hidden_dim, n_layers, n_heads, n_kv_heads,
// vocab_size, seq_len}, a negative vocab_size meaning the classifier is not
// shared; then float32 arrays, each matrix row-major [out][in] (which is
// GGUF's layout for dims {in, out}): token_embedding [vocab, dim],
// rms_att [L, dim], wq [L, dim, dim], wk and wv [L, kv_dim, dim],
// wo [L, dim, dim], rms_ffn [L, dim], w1 [L, hidden, dim], w2 [L, dim,
// hidden], w3 [L, hidden, dim], rms_final [dim], freq_cis_real and
// freq_cis_imag [seq_len, head_size / 2] (unused), and wcls [vocab, dim]
// when unshared. llama2.c's RoPE rotates adjacent pairs, GGUF llama's
// "normal" RoPE, so Q and K need no permutation.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "gguf/writer.h"
#include "model/model_shapes.h"
#include "model/synth_vocab.h"

namespace tokenmill::model {

struct Llama2cHeader {
  int64_t dim = 0;
  int64_t hidden_dim = 0;
  int64_t n_layers = 0;
  int64_t n_heads = 0;
  int64_t n_kv_heads = 0;
  int64_t vocab_size = 0;  // absolute value
  int64_t seq_len = 0;
  bool shared_classifier = true;
};

inline constexpr int64_t kLlama2cHeaderBytes = 7 * 4;

// Parses and validates the header against the file size. Throws Error
// naming `name` when a size is not positive, dim % n_heads != 0,
// n_heads % n_kv_heads != 0, or the file is not exactly as long as the
// header implies ("expected N bytes, got M").
Llama2cHeader parse_llama2c_header(std::span<const uint8_t> file, const std::string& name);

// Reads a llama2.c tokenizer.bin of `vocab_size` tokens: int32
// max_token_length, then per token float32 score, int32 length, bytes.
// Spaces become U+2581 as in SentencePiece vocabularies; tokens 0..2 are
// named <unk>, <s>, </s> (llama2.c stores "\n<s>\n" and "\n</s>\n");
// "<0xXX>" tokens are byte tokens. Throws Error naming the file when it is
// truncated or has bytes left over.
VocabTables read_llama2c_tokenizer(const std::string& path, int64_t vocab_size);

// Builds the GGUF ("llama" architecture) of a checkpoint in memory: metadata
// as llama.cpp expects it, tensors in `format` where a matrix's rows fit the
// type's blocks (else F32, with a note appended to `notes`), norms F32.
// Cost: reads the checkpoint once; output held in memory.
gguf::GgufWriter build_llama2c_gguf(const std::string& checkpoint, const std::optional<std::string>& tokenizer,
                                    const WeightFormat& format, std::vector<std::string>* notes);

// build_llama2c_gguf + write to `out`, printing the notes to stderr.
void import_llama2c(const std::string& checkpoint, const std::optional<std::string>& tokenizer, const std::string& out,
                    const WeightFormat& format);

}  // namespace tokenmill::model
