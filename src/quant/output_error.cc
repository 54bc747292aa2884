#include "quant/output_error.h"

#include <algorithm>

#include "kernels/matmul.h"

namespace tokenmill::quant {

double output_error(const std::vector<float>& h, int64_t cols, const float* d, int64_t n, ThreadPool& pool) {
  const kernels::WeightView hw{gguf::TensorType::F32, h.data(), cols, cols, nullptr};
  std::vector<float> products(static_cast<size_t>(n * cols));
  kernels::matmul(hw, d, n, products.data(), pool);
  double error = 0.0;
  for (size_t i = 0; i < products.size(); ++i) error += double(d[i]) * products[i];
  return error;
}

std::vector<int64_t> evenly_spaced_rows(int64_t rows, int64_t n) {
  n = std::min(n, rows);
  std::vector<int64_t> out(static_cast<size_t>(n));
  for (int64_t k = 0; k < n; ++k) out[static_cast<size_t>(k)] = k * rows / n;
  return out;
}

}  // namespace tokenmill::quant
