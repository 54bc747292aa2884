// Scale search for the K-quant quantizers: weighted least-squares fits of
// one sub-block's scale (and min), tried from a fan of candidate scales and
// refined by re-rounding. Cost is O(n) per candidate, about 25 candidates.
#include <cmath>

#include "kernels/ref/quant_ref_internal.h"

namespace tokenmill::kernels::detail {
namespace {

constexpr int kSymmetricSteps = 9;    // candidates -(nmax + 0.1 s) / max, |s| <= 9
constexpr int kAsymmetricSteps = 10;  // candidates (nmax + 0.1 s) / range, |s| <= 10
constexpr int kRefineRounds = 3;

struct AsymFit {
  float scale = 0.0f;
  float offset = 0.0f;  // x ~ scale * q + offset, offset <= 0
  float err = INFINITY;
};

// Weighted squared error of x ~ scale * q + offset.
float asym_error(const float* x, const float* w, const uint8_t* q, int n, float scale, float offset) {
  float err = 0.0f;
  for (int i = 0; i < n; ++i) {
    const float diff = scale * static_cast<float>(q[i]) + offset - x[i];
    err += w[i] * diff * diff;
  }
  return err;
}

// Best (scale, offset <= 0) for fixed codes q, by weighted least squares.
AsymFit fit_codes_asym(const float* x, const float* w, const uint8_t* q, int n) {
  float sw = 0, sl = 0, sll = 0, sx = 0, slx = 0;
  for (int i = 0; i < n; ++i) {
    const float l = static_cast<float>(q[i]);
    sw += w[i];
    sl += w[i] * l;
    sll += w[i] * l * l;
    sx += w[i] * x[i];
    slx += w[i] * l * x[i];
  }
  AsymFit fit;
  const float det = sw * sll - sl * sl;
  if (det > 0.0f) {
    fit.scale = (sw * slx - sl * sx) / det;
    fit.offset = (sll * sx - sl * slx) / det;
  }
  if (!(det > 0.0f) || fit.offset > 0.0f) {  // the offset may only subtract
    fit.offset = 0.0f;
    fit.scale = sll > 0.0f ? slx / sll : 0.0f;
  }
  if (fit.scale < 0.0f) fit.scale = 0.0f;
  fit.err = asym_error(x, w, q, n, fit.scale, fit.offset);
  return fit;
}

void round_asym(const float* x, int n, int nmax, float iscale, float offset, uint8_t* q) {
  for (int i = 0; i < n; ++i) q[i] = static_cast<uint8_t>(clamp_int(round_int(iscale * (x[i] - offset)), 0, nmax));
}

// Symmetric counterpart: best scale for fixed codes (stored as q + nmax) and
// the weighted error; err = sum w x^2 - (sum w x l)^2 / sum w l^2.
float fit_codes_sym(const float* x, const float* w, const uint8_t* q, int n, int nmax, float* err) {
  float sxl = 0, sll = 0, sxx = 0;
  for (int i = 0; i < n; ++i) {
    const float l = static_cast<float>(q[i] - nmax);
    sxl += w[i] * x[i] * l;
    sll += w[i] * l * l;
    sxx += w[i] * x[i] * x[i];
  }
  if (!(sll > 0.0f)) {
    *err = sxx;
    return 0.0f;
  }
  *err = sxx - sxl * sxl / sll;
  return sxl / sll;
}

void round_sym(const float* x, int n, int nmax, float iscale, uint8_t* q) {
  for (int i = 0; i < n; ++i) q[i] = static_cast<uint8_t>(clamp_int(round_int(iscale * x[i]), -nmax, nmax - 1) + nmax);
}

}  // namespace

void search_weights(const float* importance, int n, float* w) {
  float total = 0.0f;
  if (importance != nullptr) {
    for (int i = 0; i < n; ++i) {
      w[i] = importance[i] > 0.0f ? importance[i] : 0.0f;
      total += w[i];
    }
  }
  if (!(total > 0.0f) || !std::isfinite(total)) {  // absent or degenerate: uniform
    for (int i = 0; i < n; ++i) w[i] = 1.0f;
  }
}

float fit_symmetric(const float* x, const float* w, int n, int nmax, uint8_t* q) {
  float max = 0.0f;
  for (int i = 0; i < n; ++i) {
    if (std::fabs(x[i]) > std::fabs(max)) max = x[i];
  }
  if (max == 0.0f) {
    for (int i = 0; i < n; ++i) q[i] = static_cast<uint8_t>(nmax);
    return 0.0f;
  }
  uint8_t trial[kQK_K];
  float best_err = INFINITY, best_scale = 0.0f;
  for (int s = -kSymmetricSteps; s <= kSymmetricSteps; ++s) {
    round_sym(x, n, nmax, -(static_cast<float>(nmax) + 0.1f * static_cast<float>(s)) / max, trial);
    float err;
    const float scale = fit_codes_sym(x, w, trial, n, nmax, &err);
    if (err < best_err) {
      best_err = err;
      best_scale = scale;
      for (int i = 0; i < n; ++i) q[i] = trial[i];
    }
  }
  for (int r = 0; r < kRefineRounds && best_scale != 0.0f; ++r) {
    round_sym(x, n, nmax, 1.0f / best_scale, trial);
    float err;
    const float scale = fit_codes_sym(x, w, trial, n, nmax, &err);
    if (!(err < best_err)) break;
    best_err = err;
    best_scale = scale;
    for (int i = 0; i < n; ++i) q[i] = trial[i];
  }
  return best_scale;
}

float fit_asymmetric(const float* x, const float* w, int n, int nmax, uint8_t* q, float* min) {
  float lo = x[0], hi = x[0];
  for (int i = 1; i < n; ++i) {
    lo = std::fmin(lo, x[i]);
    hi = std::fmax(hi, x[i]);
  }
  if (lo > 0.0f) lo = 0.0f;
  if (!(hi > lo)) {  // constant non-positive block: all of it is the offset
    for (int i = 0; i < n; ++i) q[i] = 0;
    *min = -lo;
    return 0.0f;
  }
  uint8_t trial[kQK_K];
  const float range = hi - lo;
  AsymFit best;
  best.scale = range / static_cast<float>(nmax);
  best.offset = lo;
  round_asym(x, n, nmax, 1.0f / best.scale, lo, q);
  best.err = asym_error(x, w, q, n, best.scale, best.offset);
  for (int s = -kAsymmetricSteps; s <= kAsymmetricSteps; ++s) {
    round_asym(x, n, nmax, (static_cast<float>(nmax) + 0.1f * static_cast<float>(s)) / range, lo, trial);
    const AsymFit fit = fit_codes_asym(x, w, trial, n);
    if (fit.err < best.err && fit.scale > 0.0f) {
      best = fit;
      for (int i = 0; i < n; ++i) q[i] = trial[i];
    }
  }
  for (int r = 0; r < kRefineRounds; ++r) {
    round_asym(x, n, nmax, 1.0f / best.scale, best.offset, trial);
    const AsymFit fit = fit_codes_asym(x, w, trial, n);
    if (!(fit.err < best.err) || !(fit.scale > 0.0f)) break;
    best = fit;
    for (int i = 0; i < n; ++i) q[i] = trial[i];
  }
  *min = -best.offset;
  return best.scale;
}

}  // namespace tokenmill::kernels::detail
