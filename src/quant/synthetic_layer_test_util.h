// Synthetic layers for the calibrated-quantization tests: inputs with
// correlated channels and a few large ones (as transformer activations
// have), their Hessian, and the output error of a quantized matrix.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "gguf/tensor_type.h"
#include "kernels/quant.h"
#include "quant/importance_quant.h"
#include "quant/input_hessian.h"
#include "util/thread_pool.h"

namespace tokenmill::quant::synthetic_layer {

using gguf::TensorType;

// A layer input with correlated channels and a few large ones, as
// transformer activations have.
inline std::vector<float> synthetic_inputs(int64_t tokens, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  const int64_t k = 16;  // latent factors
  std::vector<float> mix(static_cast<size_t>(k * cols)), x(static_cast<size_t>(tokens * cols));
  for (float& v : mix) v = dist(rng);
  std::vector<float> gain(static_cast<size_t>(cols));
  for (int64_t c = 0; c < cols; ++c) gain[c] = c % 37 == 5 ? 8.0f : 0.5f + std::fabs(dist(rng));
  for (int64_t t = 0; t < tokens; ++t) {
    float z[k];
    for (float& v : z) v = dist(rng);
    for (int64_t c = 0; c < cols; ++c) {
      float s = 0.3f * dist(rng);
      for (int64_t f = 0; f < k; ++f) s += z[f] * mix[f * cols + c] * 0.25f;
      x[t * cols + c] = s * gain[c];
    }
  }
  return x;
}

// Mean output error sum_r d_r^T H d_r of quantized rows q against w.
inline double output_error(TensorType type, const std::vector<float>& w, const std::vector<uint8_t>& q, int64_t rows,
                           int64_t cols, const std::vector<double>& h) {
  std::vector<float> r(static_cast<size_t>(cols));
  double e = 0.0;
  for (int64_t row = 0; row < rows; ++row) {
    kernels::dequantize_row_ref(type, q.data() + row * gguf::row_bytes(type, cols), r.data(), cols);
    std::vector<double> d(static_cast<size_t>(cols));
    for (int64_t j = 0; j < cols; ++j) d[j] = double(w[row * cols + j]) - r[j];
    for (int64_t i = 0; i < cols; ++i) {
      double s = 0.0;
      for (int64_t j = 0; j < cols; ++j) s += h[i * cols + j] * d[j];
      e += s * d[i];
    }
  }
  return e;
}

struct Layer {
  int64_t rows = 48, cols = 512;
  std::vector<float> w;
  InputHessian hessian{512};
};

inline Layer make_layer(uint32_t seed, ThreadPool& pool) {
  Layer l;
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 0.05f);
  l.w.resize(static_cast<size_t>(l.rows * l.cols));
  for (float& v : l.w) v = dist(rng);
  const std::vector<float> x = synthetic_inputs(2048, l.cols, seed + 1);
  l.hessian.add(x.data(), 2048, pool);
  return l;
}

inline std::vector<uint8_t> quantize_rows(TensorType type, const Layer& l, const float* importance) {
  std::vector<uint8_t> q(static_cast<size_t>(gguf::row_bytes(type, l.cols) * l.rows));
  for (int64_t r = 0; r < l.rows; ++r)
    quantize_row_weighted(type, l.w.data() + r * l.cols, q.data() + r * gguf::row_bytes(type, l.cols), l.cols,
                          importance);
  return q;
}

}  // namespace tokenmill::quant::synthetic_layer
