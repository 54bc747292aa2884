#include "quant/sequential_hook.h"

#include <algorithm>

namespace tokenmill::quant {

void SequentialHook::substitute(const void* source, const kernels::WeightView& encoded,
                                const std::vector<float>* col_scale, const std::vector<float>* row_divide) {
  substitutes_[source] = {encoded, col_scale, row_divide};
}

bool SequentialHook::matmul(const kernels::WeightView& w, const float* x, int64_t num_tokens, float* y,
                            ThreadPool& pool) {
  if (skipped_.contains(w.data)) {
    std::fill(y, y + num_tokens * w.rows, 0.0f);
    return true;
  }
  const auto it = substitutes_.find(w.data);
  if (it == substitutes_.end()) return inner_.matmul(w, x, num_tokens, y, pool);
  const Substitute& s = it->second;
  const float* input = x;
  if (s.col_scale != nullptr) {
    scaled_.resize(static_cast<size_t>(num_tokens * w.cols));
    for (int64_t t = 0; t < num_tokens; ++t) {
      for (int64_t j = 0; j < w.cols; ++j) scaled_[t * w.cols + j] = x[t * w.cols + j] / (*s.col_scale)[j];
    }
    input = scaled_.data();
  }
  kernels::matmul(s.encoded, input, num_tokens, y, pool);
  if (s.row_divide != nullptr) {
    for (int64_t t = 0; t < num_tokens; ++t) {
      for (int64_t r = 0; r < w.rows; ++r) y[t * w.rows + r] *= (*s.row_divide)[r];
    }
  }
  return true;
}

}  // namespace tokenmill::quant
