#include "quant/input_hessian.h"

#include <cmath>

#include "kernels/matmul.h"

namespace tokenmill::quant {

InputHessian::InputHessian(int64_t cols)
    : cols_(cols), h_(static_cast<size_t>(cols * cols), 0.0f), sum_abs_(static_cast<size_t>(cols), 0.0) {}

void InputHessian::add(const float* x, int64_t num_tokens, ThreadPool& pool) {
  const int64_t n = cols_;
  // X^T X as a product of X^T [n, num_tokens] with itself through the
  // float matmul kernels (the ISA-dispatched ones): y = x W^T with W = x =
  // X^T. It computes the whole square, twice the triangle's work, at the
  // kernels' speed.
  // Scratch kept across calls (the forward thread's own): allocated on
  // every call, the product (4 n^2 bytes) would be fresh pages each time
  // where large buffers are mapped (quantize fixes glibc's mmap threshold).
  thread_local std::vector<float> xt, y;
  xt.resize(static_cast<size_t>(n * num_tokens));
  for (int64_t t = 0; t < num_tokens; ++t) {
    for (int64_t c = 0; c < n; ++c) xt[static_cast<size_t>(c * num_tokens + t)] = x[t * n + c];
  }
  y.resize(static_cast<size_t>(n * n));
  const kernels::WeightView w{gguf::TensorType::F32, xt.data(), n, num_tokens, nullptr};
  kernels::matmul(w, xt.data(), n, y.data(), pool);
  for (size_t i = 0; i < y.size(); ++i) h_[i] += y[i];
  for (int64_t t = 0; t < num_tokens; ++t) {
    for (int64_t c = 0; c < n; ++c) sum_abs_[static_cast<size_t>(c)] += std::fabs(x[t * n + c]);
  }
  count_ += num_tokens;
}

void InputHessian::merge(const InputHessian& other) {
  for (size_t i = 0; i < h_.size(); ++i) h_[i] += other.h_[i];
  for (size_t c = 0; c < sum_abs_.size(); ++c) sum_abs_[c] += other.sum_abs_[c];
  count_ += other.count_;
}

std::vector<double> InputHessian::mean_full() const {
  const int64_t n = cols_;
  std::vector<double> out(static_cast<size_t>(n * n));
  const double inv = count_ > 0 ? 1.0 / static_cast<double>(count_) : 0.0;
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = i; j < n; ++j) {
      const double v = 0.5 * (double(h_[static_cast<size_t>(i * n + j)]) + h_[static_cast<size_t>(j * n + i)]) * inv;
      out[static_cast<size_t>(i * n + j)] = v;
      out[static_cast<size_t>(j * n + i)] = v;
    }
  }
  return out;
}

std::vector<float> InputHessian::mean_abs() const {
  std::vector<float> out(static_cast<size_t>(cols_));
  const double inv = count_ > 0 ? 1.0 / static_cast<double>(count_) : 0.0;
  for (size_t c = 0; c < out.size(); ++c) out[c] = static_cast<float>(sum_abs_[c] * inv);
  return out;
}

std::vector<float> InputHessian::mean_sq() const {
  std::vector<float> out(static_cast<size_t>(cols_));
  const double inv = count_ > 0 ? 1.0 / static_cast<double>(count_) : 0.0;
  for (int64_t c = 0; c < cols_; ++c) out[static_cast<size_t>(c)] = static_cast<float>(h_[c * cols_ + c] * inv);
  return out;
}

}  // namespace tokenmill::quant
