// Perplexity and KL-divergence evaluation over sliding windows (windows.h).
//
// evaluate() runs the model under test window by window, in batches of
// `batch` tokens, and scores each target: NLL under the model, and when a
// base is given (live, or saved logits), KL(base || model), top-1 agreement
// and the base's NLL, all per context-position bucket. The base and the
// model step in lockstep, so only 2 * batch rows of logits are held at once
// (Gemma 3: 2 * 64 * 262144 floats = 134 MB).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "eval/position_buckets.h"
#include "gguf/reader.h"
#include "kv/kv_dtype.h"
#include "kv/kv_policy.h"
#include "model/matmul_hook.h"
#include "model/model.h"
#include "util/thread_pool.h"

namespace tokenmill::eval {

struct EvalSpec {
  int64_t ctx = 512;
  int64_t stride = 0;  // 0: ctx / 2
  int64_t batch = 64;  // tokens per forward call
  int64_t effective_stride() const { return stride > 0 ? stride : std::max<int64_t>(1, ctx / 2); }
};

// A model as evaluated: its weights runtime (hook, may be null) and KV type.
struct ModelUnderTest {
  model::Model* model = nullptr;
  model::MatmulHook* hook = nullptr;
  kv::KvDtype kv_dtype = kv::KvDtype::F32;
  const model::LoraAdapter* adapter = nullptr;  // loaded for `model`; null: the base weights
  // What the cache keeps (kv/kv_policy.h): with a policy that evicts, each
  // batch of a window is one step, evicting before it as the engine does.
  kv::KvPolicy kv_policy;
};

// Sequences to evaluate, each starting with its BOS (S[0]); windows never
// span two sequences.
using Sequences = std::vector<std::vector<int32_t>>;

// Base logits saved by an earlier run (`eval kld --save-base-logits`): a
// GGUF holding the sequences, the window spec and the logits of every
// scored target in order. Memory-mapped.
class SavedLogits {
 public:
  static SavedLogits open(const std::string& path);  // throws Error for anything else
  const Sequences& sequences() const { return sequences_; }
  int64_t ctx() const { return ctx_; }
  int64_t stride() const { return stride_; }
  int64_t n_vocab() const { return n_vocab_; }
  int64_t num_rows() const { return num_rows_; }
  const float* row(int64_t i) const { return logits_ + i * n_vocab_; }

 private:
  SavedLogits(gguf::GgufFile f) : file_(std::move(f)) {}
  gguf::GgufFile file_;
  Sequences sequences_;
  int64_t ctx_ = 0, stride_ = 0, n_vocab_ = 0, num_rows_ = 0;
  const float* logits_ = nullptr;
};

struct EvalResult {
  PositionBuckets buckets{2};
  int64_t num_scored = 0;
  int64_t num_windows = 0;
  double seconds = 0;
};

// Evaluates `m` on the sequences. With `base`, also the KL terms; with
// `save_path` (requires base), writes the base's scored logits there.
// Throws Error when the vocabularies differ, a token is outside them, a
// sequence is shorter than 2 tokens, or the context exceeds a model's
// training context.
EvalResult evaluate(const ModelUnderTest& m, const ModelUnderTest* base, const Sequences& sequences,
                    const EvalSpec& spec, ThreadPool& pool, const std::string& save_path = "");
// Evaluates `m` against saved base logits (sequences and windows from the file).
EvalResult evaluate_saved(const ModelUnderTest& m, const SavedLogits& base, int64_t batch, ThreadPool& pool);

}  // namespace tokenmill::eval
