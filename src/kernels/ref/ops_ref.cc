// Scalar references for ops.h. Transcendentals and reductions run in double
// so that these are accurate to about one float rounding of the result.
#include <cmath>
#include <numbers>

#include "kernels/ops.h"

namespace tokenmill::kernels {

void rms_norm_ref(const float* x, const float* w, float* out, int64_t n, float eps) {
  if (n <= 0) return;
  double sum_sq = 0.0;
  for (int64_t i = 0; i < n; ++i) sum_sq += static_cast<double>(x[i]) * x[i];
  const float inv = static_cast<float>(1.0 / std::sqrt(sum_sq / static_cast<double>(n) + eps));
  for (int64_t i = 0; i < n; ++i) out[i] = w != nullptr ? x[i] * inv * w[i] : x[i] * inv;
}

void swiglu_ref(float* gate, const float* up, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const double g = gate[i];
    gate[i] = static_cast<float>(g / (1.0 + std::exp(-g)) * up[i]);
  }
}

// 0.5 g (1 + tanh(u)) is evaluated as g / (1 + e^(-2u)): the same value
// without the cancellation of 1 + tanh(u) for u << 0 (which would return 0
// instead of ~1e-19 even in double).
void geglu_tanh_ref(float* gate, const float* up, int64_t n) {
  const double k = std::sqrt(2.0 / std::numbers::pi);
  for (int64_t i = 0; i < n; ++i) {
    const double g = gate[i];
    const double gelu = g / (1.0 + std::exp(-2.0 * k * (g + 0.044715 * g * g * g)));
    gate[i] = static_cast<float>(gelu * up[i]);
  }
}

void softmax_ref(float* x, int64_t n) {
  if (n <= 0) return;
  float max_v = x[0];
  for (int64_t i = 1; i < n; ++i) max_v = std::fmax(max_v, x[i]);
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += std::exp(static_cast<double>(x[i]) - max_v);
  for (int64_t i = 0; i < n; ++i) {
    x[i] = static_cast<float>(std::exp(static_cast<double>(x[i]) - max_v) / sum);
  }
}

void add_inplace_ref(float* y, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

void scale_inplace_ref(float* x, float s, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] *= s;
}

}  // namespace tokenmill::kernels
