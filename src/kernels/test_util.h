// Helpers shared by the kernel tests (test code only).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/matmul.h"
#include "kernels/quant.h"
#include "kernels/quantize_act.h"

namespace tokenmill::kernels::testing {

// The block-quantized weight types with integer dot products.
constexpr gguf::TensorType kBlockQuantTypes[] = {gguf::TensorType::Q4_0, gguf::TensorType::Q4_1, gguf::TensorType::Q5_0,
                                                 gguf::TensorType::Q5_1, gguf::TensorType::Q8_0, gguf::TensorType::Q2_K,
                                                 gguf::TensorType::Q3_K, gguf::TensorType::Q4_K, gguf::TensorType::Q5_K,
                                                 gguf::TensorType::Q6_K};

inline std::vector<float> gaussian(int64_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = dist(rng);
  return v;
}

// A weight matrix quantized row by row with the reference quantizer.
struct Weights {
  Weights(gguf::TensorType type, int64_t rows, int64_t cols, uint32_t seed) {
    const int64_t rb = gguf::row_bytes(type, cols);
    bytes.resize(static_cast<size_t>(rows * rb));
    const auto values = gaussian(rows * cols, seed);
    for (int64_t r = 0; r < rows; ++r) {
      quantize_row_ref(type, values.data() + r * cols, bytes.data() + r * rb, cols);
    }
    view = {type, bytes.data(), rows, cols};
  }
  std::vector<uint8_t> bytes;
  WeightView view;
};

// Quantized activations of x [nt, cols] by the reference quantizer.
struct Acts {
  Acts(const float* x, int64_t nt, int64_t cols) {
    buffer.resize(nt, cols);
    quantize_acts_ref(x, nt, cols, {buffer.qs(), buffer.d(), buffer.s32(), buffer.s16()});
    rounded.resize(static_cast<size_t>(nt * cols));
    for (int64_t t = 0; t < nt; ++t) dequantize_acts(buffer.view(), t, rounded.data() + t * cols);
  }
  QuantizedActsBuffer buffer;
  std::vector<float> rounded;  // [nt, cols]: d * q, what the integer path multiplies
};

// The additive term (minimum) of every element of row r, for the types whose
// integer path adds it through the activation sums (Q4_1, Q5_1, Q2_K, Q4_K,
// Q5_K): the row dequantized with its quant bits zeroed. Zeros otherwise.
inline std::vector<float> bias_terms(const WeightView& w, int64_t r) {
  using gguf::TensorType;
  struct Span {
    int64_t block_bytes, first, last;
  };  // quant bytes [first, last) of each block
  Span span{0, 0, 0};
  switch (w.type) {
    case TensorType::Q4_1: span = {20, 4, 20}; break;
    case TensorType::Q5_1: span = {24, 4, 24}; break;
    case TensorType::Q2_K: span = {84, 16, 80}; break;
    case TensorType::Q4_K: span = {144, 16, 144}; break;
    case TensorType::Q5_K: span = {176, 16, 176}; break;
    default: return std::vector<float>(static_cast<size_t>(w.cols), 0.0f);
  }
  const int64_t rb = gguf::row_bytes(w.type, w.cols);
  std::vector<uint8_t> row(static_cast<const uint8_t*>(w.data) + r * rb,
                           static_cast<const uint8_t*>(w.data) + (r + 1) * rb);
  for (int64_t b = 0; b < rb; b += span.block_bytes)
    std::memset(row.data() + b + span.first, 0, static_cast<size_t>(span.last - span.first));
  std::vector<float> out(static_cast<size_t>(w.cols));
  dequantize_row_ref(w.type, row.data(), out.data(), w.cols);
  return out;
}

// Bound of the float rounding of one output of the integer decode path (and
// of the float paths, where the bias terms are zero): every term it sums is
// at most |w_c x_c| + 2 |b_c x_c| (the scaled integer part d*sc*q = w - b and
// the bias b), each rounding step costs at most 2^-24 of the running sum of
// magnitudes, and there are at most `steps` of them.
inline double rounding_bound(const std::vector<float>& w_row, const std::vector<float>& bias, const float* x,
                             int64_t cols, double steps) {
  double magnitude = 0;
  for (int64_t c = 0; c < cols; ++c) {
    magnitude += (std::fabs(double(w_row[c])) + 2 * std::fabs(double(bias[c]))) * std::fabs(double(x[c]));
  }
  return (steps + 1) * std::ldexp(1.0, -24) * magnitude + 1e-30;
}

// Bound of |W[r] . x - W[r] . dequant(quant(x))|: each element moves by at
// most 0.51 * max_block|x| / 32767 (half a step, plus the rounding of the
// scale and of x * 32767 / max, see quantize_act_test.cc).
inline double activation_bound(const std::vector<float>& w_row, const float* x, int64_t cols) {
  double bound = 0;
  for (int64_t b = 0; b < cols; b += kActBlock) {
    double amax = 0, wsum = 0;
    for (int64_t c = b; c < b + kActBlock; ++c) {
      amax = std::max(amax, std::fabs(double(x[c])));
      wsum += std::fabs(double(w_row[c]));
    }
    bound += 0.51 * amax / 32767 * wsum;
  }
  return bound;
}

}  // namespace tokenmill::kernels::testing
