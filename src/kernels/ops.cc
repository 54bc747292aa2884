// Public ops: dispatch to the active ISA; rope has one (scalar) version.
#include "kernels/ops.h"

#include <cmath>
#include <vector>

#include "kernels/dispatch.h"
#include "util/check.h"

namespace tokenmill::kernels {

void rms_norm(const float* x, const float* w, float* out, int64_t n, float eps) {
  active_kernels().rms_norm(x, w, out, n, eps);
}

void swiglu(float* gate, const float* up, int64_t n) { active_kernels().swiglu(gate, up, n); }

void geglu_tanh(float* gate, const float* up, int64_t n) { active_kernels().geglu_tanh(gate, up, n); }

void softmax(float* x, int64_t n) { active_kernels().softmax(x, n); }

void add_inplace(float* y, const float* x, int64_t n) { active_kernels().add_inplace(y, x, n); }

void scale_inplace(float* x, float s, int64_t n) { active_kernels().scale_inplace(x, s, n); }

// The angle is formed in double: pos * freq reaches ~1e5 radians at long
// contexts, where float would lose ~1e-2 rad. Cost: one pow and one sincos
// per pair, small next to the projections that produce the head.
void rope_angles(int64_t rope_dims, int64_t pos, float freq_base, float freq_scale, const float* freq_factors,
                 double* cos_out, double* sin_out) {
  TM_CHECK(rope_dims >= 0 && rope_dims % 2 == 0);
  const double position = static_cast<double>(pos) * freq_scale;
  for (int64_t i = 0; i < rope_dims / 2; ++i) {
    double theta = position * std::pow(static_cast<double>(freq_base),
                                       -2.0 * static_cast<double>(i) / static_cast<double>(rope_dims));
    if (freq_factors != nullptr) theta /= freq_factors[i];
    cos_out[i] = std::cos(theta);
    sin_out[i] = std::sin(theta);
  }
}

void rope_apply(float* head, int64_t rope_dims, const double* cos_in, const double* sin_in, bool neox) {
  const int64_t half = rope_dims / 2;
  for (int64_t i = 0; i < half; ++i) {
    float* a = neox ? head + i : head + 2 * i;
    float* b = neox ? head + i + half : head + 2 * i + 1;
    const double a0 = *a;
    const double b0 = *b;
    *a = static_cast<float>(a0 * cos_in[i] - b0 * sin_in[i]);
    *b = static_cast<float>(a0 * sin_in[i] + b0 * cos_in[i]);
  }
}

void rope(float* head, int64_t head_dim, int64_t rope_dims, int64_t pos, float freq_base, float freq_scale,
          const float* freq_factors, bool neox) {
  TM_CHECK(rope_dims >= 0 && rope_dims <= head_dim && rope_dims % 2 == 0);
  std::vector<double> c(static_cast<size_t>(rope_dims / 2)), s(c.size());
  rope_angles(rope_dims, pos, freq_base, freq_scale, freq_factors, c.data(), s.data());
  rope_apply(head, rope_dims, c.data(), s.data(), neox);
}

}  // namespace tokenmill::kernels
