// Scalar on purpose: the angles are per token, not per element, and cost a
// sincos per pair; the rotation is a few multiplies per element next to the
// projections that produced the head.
#include "kernels/rope.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "util/check.h"

namespace tokenmill::kernels {
namespace {

// The pair index at which a frequency completes `rotations` turns over
// orig_ctx positions (solving orig_ctx * base^(-2i/d) = 2 pi rotations for i).
double corr_dim(int64_t rope_dims, int64_t orig_ctx, double rotations, double base) {
  return static_cast<double>(rope_dims) *
         std::log(static_cast<double>(orig_ctx) / (rotations * 2.0 * std::numbers::pi)) / (2.0 * std::log(base));
}

}  // namespace

void yarn_corr_dims(int64_t rope_dims, int64_t orig_ctx, double base, double beta_fast, double beta_slow,
                    double out[2]) {
  out[0] = std::max(0.0, std::floor(corr_dim(rope_dims, orig_ctx, beta_fast, base)));
  out[1] = std::min(static_cast<double>(rope_dims - 1), std::ceil(corr_dim(rope_dims, orig_ctx, beta_slow, base)));
}

RopeFrequencies rope_frequencies(int64_t rope_dims, double base, const RopeScaling& s, const float* freq_factors) {
  TM_CHECK(rope_dims > 0 && rope_dims % 2 == 0);
  TM_CHECK(base > 0.0 && s.freq_scale > 0.0);
  const bool yarn = s.ext_factor != 0.0;
  TM_CHECK(!yarn || s.orig_ctx > 0);
  double corr[2] = {0.0, 0.0};
  if (yarn) yarn_corr_dims(rope_dims, s.orig_ctx, base, s.beta_fast, s.beta_slow, corr);

  RopeFrequencies f;
  f.freq.resize(static_cast<size_t>(rope_dims / 2));
  for (int64_t i = 0; i < rope_dims / 2; ++i) {
    double extrap = std::pow(base, -2.0 * static_cast<double>(i) / static_cast<double>(rope_dims));
    if (freq_factors != nullptr) extrap /= freq_factors[i];
    const double interp = s.freq_scale * extrap;
    double mix = 0.0;
    if (yarn) {
      const double y = (static_cast<double>(i) - corr[0]) / std::max(0.001, corr[1] - corr[0]);
      mix = (1.0 - std::clamp(y, 0.0, 1.0)) * s.ext_factor;
    }
    f.freq[static_cast<size_t>(i)] = interp * (1.0 - mix) + extrap * mix;
  }
  f.mscale = s.attn_factor;
  if (yarn) f.mscale *= 1.0 + 0.1 * std::log(1.0 / s.freq_scale);
  return f;
}

void rope_angles(const RopeFrequencies& f, int64_t pos, double* cos_out, double* sin_out) {
  const double p = static_cast<double>(pos);
  for (size_t i = 0; i < f.freq.size(); ++i) {
    const double theta = p * f.freq[i];
    cos_out[i] = std::cos(theta) * f.mscale;
    sin_out[i] = std::sin(theta) * f.mscale;
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

void rope_angles(int64_t rope_dims, int64_t pos, float freq_base, float freq_scale, const float* freq_factors,
                 double* cos_out, double* sin_out) {
  TM_CHECK(rope_dims >= 0 && rope_dims % 2 == 0);
  if (rope_dims == 0) return;
  RopeScaling s;
  s.freq_scale = freq_scale;
  rope_angles(rope_frequencies(rope_dims, freq_base, s, freq_factors), pos, cos_out, sin_out);
}

void rope(float* head, int64_t head_dim, int64_t rope_dims, int64_t pos, float freq_base, float freq_scale,
          const float* freq_factors, bool neox) {
  TM_CHECK(rope_dims >= 0 && rope_dims <= head_dim && rope_dims % 2 == 0);
  std::vector<double> c(static_cast<size_t>(rope_dims / 2)), s(c.size());
  rope_angles(rope_dims, pos, freq_base, freq_scale, freq_factors, c.data(), s.data());
  rope_apply(head, rope_dims, c.data(), s.data(), neox);
}

}  // namespace tokenmill::kernels
