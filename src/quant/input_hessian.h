// Second-order statistics of a weight matrix's input, for GPTQ and AWQ:
// over the calibration tokens x (rows of X: [num_tokens, cols]),
//   h       = X^T X           [cols, cols], float32 as GPTQ keeps it;
//   sum_abs = sum_t |x[t, c]| [cols] (AWQ's activation magnitude);
//   sum_sq  = diag(h), in float64 (the imatrix's importance).
// Matrices that read the same input (q/k/v, gate/up) share one.
//
// Cost: add() is num_tokens * cols^2 multiply-adds in the float matmul
// kernels, over the pool; memory 4 cols^2 bytes (plus as much for the
// product while adding).
#pragma once

#include <cstdint>
#include <vector>

#include "util/thread_pool.h"

namespace tokenmill::quant {

class InputHessian {
 public:
  explicit InputHessian(int64_t cols);

  // x: [num_tokens, cols].
  void add(const float* x, int64_t num_tokens, ThreadPool& pool);
  // Adds another collection's statistics (same cols) to these.
  void merge(const InputHessian& other);

  int64_t cols() const { return cols_; }
  int64_t count() const { return count_; }
  // X^T X / count as a full symmetric matrix [cols, cols] (float64).
  std::vector<double> mean_full() const;
  // Mean |x| per column (AWQ), and mean x^2 (the imatrix importance).
  std::vector<float> mean_abs() const;
  std::vector<float> mean_sq() const;
  int64_t bytes() const { return cols_ * cols_ * 4; }

 private:
  int64_t cols_;
  int64_t count_ = 0;
  std::vector<float> h_;  // [cols, cols], upper triangle valid
  std::vector<double> sum_abs_;
};

}  // namespace tokenmill::quant
