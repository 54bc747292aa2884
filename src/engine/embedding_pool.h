// Embedding requests (GenerateRequest::embedding): how the final hidden
// states of a prompt's positions become one vector.
//
// The hidden state of a position is the output of the model's final norm,
// the vector the LM head reads (what llama.cpp pools for decoder LLMs). The
// pool takes them chunk by chunk as prefill computes them, so a request
// holds O(n_embd) memory whatever its length, and hands back the pooled
// vector L2-normalised (unit length, as OpenAI's embeddings are).
//
// Thread-safety: none (the engine thread owns each request's pool).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

namespace tokenmill::engine {

enum class Pooling {
  kMean,  // the average over every prompt position
  kLast,  // the last prompt position's (it has attended to the whole prompt)
};

// "mean" | "last".
std::string_view pooling_name(Pooling pooling);
// nullopt for anything but "mean" and "last".
std::optional<Pooling> parse_pooling(std::string_view name);

class EmbeddingPool {
 public:
  // num_positions: the prompt's length (>= 1); n_embd: the hidden width.
  EmbeddingPool(Pooling pooling, int64_t num_positions, int64_t n_embd);

  Pooling pooling() const { return pooling_; }

  // Whether a chunk at positions [start_pos, start_pos + num_tokens) has
  // hidden states this pool still needs: mean, any position not added yet;
  // last, the last position.
  bool wants(int64_t start_pos, int64_t num_tokens) const;

  // Adds the hidden states of positions [start_pos, start_pos + rows / n_embd).
  // Positions already added (recomputed after a preemption) and positions
  // past the prompt are ignored. Mean pooling takes positions in order:
  // precondition (checked) start_pos <= the first position not added yet,
  // so no position is ever skipped.
  void add(int64_t start_pos, std::span<const float> rows);  // [num_rows, n_embd]

  // True once every position the pooling needs has been added.
  bool complete() const;

  // The pooled vector, L2-normalised ([n_embd]); a zero vector stays zero.
  // Precondition (checked): complete().
  std::vector<float> finish() const;

 private:
  Pooling pooling_;
  int64_t num_positions_;
  int64_t n_embd_;
  int64_t num_added_ = 0;    // mean: positions [0, num_added_) are in sum_
  std::vector<double> sum_;  // [n_embd]: mean, the running sum; last, the last row
  bool have_last_ = false;
};

}  // namespace tokenmill::engine
