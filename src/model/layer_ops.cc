#include "model/layer_ops.h"

#include <cmath>

#include "kernels/ops.h"

namespace tokenmill::model {

void norm_rows(const float* in, const VectorView& w, float* out, int64_t rows, int64_t n, float eps) {
  for (int64_t t = 0; t < rows; ++t) kernels::rms_norm(in + t * n, w.data, out + t * n, n, eps);
}

const float* block_input(const float* x, const VectorView& w, float* scratch, int64_t rows, int64_t n, float eps) {
  if (!w.present()) return x;
  norm_rows(x, w, scratch, rows, n, eps);
  return scratch;
}

void add_residual(float* x, float* out, float scale, int64_t n) {
  if (scale != 1.0f) kernels::scale_inplace(out, scale, n);
  kernels::add_inplace(x, out, n);
}

void softcap_inplace(float* x, int64_t n, float cap, ThreadPool& pool) {
  pool.parallel_for(n, [&](int, int64_t first, int64_t last) {
    for (int64_t i = first; i < last; ++i) x[i] = cap * std::tanh(x[i] / cap);
  });
}

void add_bias(float* y, const VectorView& b, int64_t rows) {
  if (!b.present()) return;
  for (int64_t t = 0; t < rows; ++t) kernels::add_inplace(y + t * b.size, b.data, b.size);
}

}  // namespace tokenmill::model
