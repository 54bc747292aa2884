// A loaded model: the mapped GGUF file, its hyperparameters, tensor views and
// the decoder forward pass shared by llama, qwen2 and gemma3 (the variants
// differ only in flags and optional tensors; see docs/architecture.md).
//
// Thread-safety: forward() uses per-model scratch buffers, so one caller at a
// time (the engine thread). The pool does the parallel work.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "gguf/reader.h"
#include "model/config.h"
#include "model/kv_cache.h"
#include "model/weights.h"
#include "util/thread_pool.h"

namespace tokenmill::model {

// A run of consecutive tokens of one sequence, at positions
// [start_pos, start_pos + tokens.size()), appended to that sequence's cache.
struct SequenceChunk {
  std::span<const int32_t> tokens;
  int64_t start_pos = 0;
  SequenceKvCache* cache = nullptr;
  bool all_logits = false;  // logits for every token, else for the last only
};

class Model {
 public:
  // Maps and binds the file. Throws Error for unreadable or unsupported files.
  static std::unique_ptr<Model> load(const std::string& path);
  ~Model();

  const ModelConfig& config() const { return config_; }
  const gguf::GgufFile& file() const { return file_; }
  const ModelWeights& weights() const { return weights_; }

  // Runs one step over a flat batch made of the chunks, in order, and writes
  // their logits to `logits` as rows [num_rows, n_vocab]: every token's row for
  // chunks with all_logits, else the chunk's last row. Preconditions (checked,
  // Error): tokens inside the vocabulary, start_pos == cache->size(), and the
  // chunk fits the cache's capacity. On return each cache's size has grown.
  void forward(std::span<const SequenceChunk> chunks, std::vector<float>& logits, ThreadPool& pool);

 private:
  explicit Model(gguf::GgufFile file);

  struct Scratch;
  void attention_block(int64_t layer, std::span<const SequenceChunk> chunks,
                       std::span<const int64_t> positions, ThreadPool& pool);
  void ffn_block(int64_t layer, ThreadPool& pool);

  gguf::GgufFile file_;
  ModelConfig config_;
  ModelWeights weights_;
  std::unique_ptr<Scratch> scratch_;
};

}  // namespace tokenmill::model
