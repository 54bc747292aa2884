// A hook on every weight product of Model::forward, for the tools that must
// see or replace them: calibration (records each product's input
// activations) and alternative weight runtimes selected at load time (W8A8
// integer products, FP8 weights). Without a hook the model calls
// kernels::matmul.
//
// Thread-safety: called from the forward thread only, in the order of the
// forward pass; the hook may use the pool.
#pragma once

#include <cstdint>

#include "kernels/matmul.h"
#include "util/thread_pool.h"

namespace tokenmill::model {

class MatmulHook {
 public:
  virtual ~MatmulHook() = default;
  // y = W x for x: [num_tokens, w.cols], y: [num_tokens, w.rows]. `w` is one
  // of the model's WeightViews (identify it by w.data, which points into the
  // model file). Returns true when it wrote y itself, false to let the model
  // run kernels::matmul.
  virtual bool matmul(const kernels::WeightView& w, const float* x, int64_t num_tokens, float* y, ThreadPool& pool) = 0;
};

}  // namespace tokenmill::model
