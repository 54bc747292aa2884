// Calibration: runs a model over text and records, for every weight matrix,
// the statistics of its input activations (imatrix.h), through a MatmulHook
// that observes each product and lets the model compute it as usual.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <unordered_map>

#include "model/matmul_hook.h"
#include "model/model.h"
#include "quant/imatrix.h"
#include "util/thread_pool.h"

namespace tokenmill::quant {

// Records x of every product under the name of the model tensor W points
// into (the tied output records under token_embd.weight).
class ImatrixCollector : public model::MatmulHook {
 public:
  explicit ImatrixCollector(const model::Model& model);
  bool matmul(const kernels::WeightView& w, const float* x, int64_t num_tokens, float* y, ThreadPool& pool) override;
  Imatrix& imatrix() { return imatrix_; }

 private:
  std::unordered_map<const void*, std::string> names_;
  Imatrix imatrix_;
};

struct CalibrationSpec {
  int64_t ctx = 512;       // tokens per chunk (BOS included)
  int64_t max_chunks = 0;  // 0: all
  int64_t batch = 64;      // tokens per forward call
};

// Runs the model over the calibration tokens with `hook` observing every
// product: tokens (tokens[0] = BOS) are split into chunks of ctx - 1 text
// tokens, each run from a fresh context as [BOS, chunk...] with every row's
// logits (so that the classifier sees every position too). Returns the
// number of chunks run. `progress(done, total)` is called after each chunk
// (may be empty). Throws Error when there are fewer than 2 tokens or ctx is
// out of range; the hook is detached in every case.
int64_t run_calibration(model::Model& model, std::span<const int32_t> tokens, const CalibrationSpec& spec,
                        ThreadPool& pool, model::MatmulHook& hook,
                        const std::function<void(int64_t, int64_t)>& progress);

// run_calibration with an ImatrixCollector. Splits tokens (tokens[0] = BOS) into chunks of ctx - 1 text tokens, each
// run from a fresh context as [BOS, chunk...] with every row's logits (so
// that the classifier sees every position too), and returns the statistics.
// `progress(done, total)` is called after each chunk (may be empty).
// Throws Error when there are fewer than 2 tokens or ctx is out of range.
Imatrix calibrate(model::Model& model, std::span<const int32_t> tokens, const CalibrationSpec& spec, ThreadPool& pool,
                  const std::function<void(int64_t, int64_t)>& progress);

}  // namespace tokenmill::quant
