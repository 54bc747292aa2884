#include "quant/importance_quant.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/quant.h"
#include "kernels/quant_blocks.h"
#include "util/fp16.h"

namespace tokenmill::quant {
namespace {

using gguf::TensorType;

constexpr int kBlock = 32;
constexpr int kSteps = 10;  // candidates at natural scale * (levels + 0.1 k) / levels, |k| <= kSteps
constexpr float kStep = 0.1f;

float half(float v) { return fp16_to_fp32(fp32_to_fp16(v)); }

// One block's result: codes q (0-based, as stored), scale d, offset m.
struct Fit {
  int q[kBlock];
  float d = 0.0f;
  float m = 0.0f;
  double err = 0.0;
};

// Codes for the stored (fp16) d and m, and the weighted error they give.
// Symmetric types: x^ = d (q - offset), m unused (0).
void finish(const float* x, const float* w, int nmax, int offset, bool asym, Fit& f) {
  f.d = half(f.d);
  f.m = asym ? half(f.m) : 0.0f;
  const float id = f.d != 0.0f ? 1.0f / f.d : 0.0f;
  f.err = 0.0;
  for (int i = 0; i < kBlock; ++i) {
    const int q = std::clamp(static_cast<int>(std::nearbyint((x[i] - f.m) * id)) + offset, 0, nmax);
    f.q[i] = q;
    const double e = x[i] - (f.d * static_cast<float>(q - offset) + f.m);
    f.err += w[i] * e * e;
  }
}

// Symmetric: levels q - offset in [-offset, nmax - offset].
Fit search_symmetric(const float* x, const float* w, int nmax, int offset) {
  float max = 0.0f;
  for (int i = 0; i < kBlock; ++i) {
    if (std::fabs(x[i]) > std::fabs(max)) max = x[i];
  }
  Fit best;
  best.err = -1.0;
  if (max == 0.0f) {
    finish(x, w, nmax, offset, false, best);
    return best;
  }
  for (int k = -kSteps; k <= kSteps; ++k) {
    const float id = (-static_cast<float>(offset) + kStep * static_cast<float>(k)) / max;
    double swxq = 0.0, swqq = 0.0;
    for (int i = 0; i < kBlock; ++i) {
      const int l = std::clamp(static_cast<int>(std::nearbyint(x[i] * id)), -offset, nmax - offset);
      swxq += double(w[i]) * x[i] * l;
      swqq += double(w[i]) * l * l;
    }
    Fit f;
    f.d = swqq > 0.0 ? static_cast<float>(swxq / swqq) : 1.0f / id;
    finish(x, w, nmax, offset, false, f);
    if (best.err < 0.0 || f.err < best.err) best = f;
  }
  return best;
}

// Asymmetric: x^ = d q + m, q in [0, nmax]; (d, m) by weighted least squares.
Fit search_asymmetric(const float* x, const float* w, int nmax) {
  float lo = x[0], hi = x[0];
  for (int i = 1; i < kBlock; ++i) lo = std::min(lo, x[i]), hi = std::max(hi, x[i]);
  Fit best;
  best.err = -1.0;
  for (int k = -kSteps; k <= kSteps; ++k) {
    Fit f;
    f.m = lo;
    f.d = (hi - lo) / (static_cast<float>(nmax) + kStep * static_cast<float>(k));
    const float id = f.d > 0.0f ? 1.0f / f.d : 0.0f;
    double sw = 0, sq = 0, sqq = 0, sx = 0, sqx = 0;
    for (int i = 0; i < kBlock; ++i) {
      const double q = std::clamp(static_cast<int>(std::nearbyint((x[i] - lo) * id)), 0, nmax);
      sw += w[i], sq += w[i] * q, sqq += w[i] * q * q, sx += w[i] * x[i], sqx += w[i] * q * x[i];
    }
    const double det = sw * sqq - sq * sq;
    if (det > 0.0) {
      f.d = static_cast<float>((sw * sqx - sq * sx) / det);
      f.m = static_cast<float>((sqq * sx - sq * sqx) / det);
      if (f.d < 0.0f) f.d = 0.0f;
    }
    finish(x, w, nmax, 0, true, f);
    if (best.err < 0.0 || f.err < best.err) best = f;
  }
  return best;
}

void pack_nibbles(const int* q, uint8_t* qs) {
  for (int j = 0; j < 16; ++j) qs[j] = static_cast<uint8_t>((q[j] & 15) | ((q[j + 16] & 15) << 4));
}

void pack_fifth(const int* q, uint8_t* qh) {
  uint32_t bits = 0;
  for (int j = 0; j < kBlock; ++j) bits |= static_cast<uint32_t>((q[j] >> 4) & 1) << j;
  std::memcpy(qh, &bits, 4);
}

// Writes the fit as one block of `type` at dst.
void encode(TensorType type, const Fit& f, uint8_t* dst) {
  const uint16_t d = fp32_to_fp16(f.d), m = fp32_to_fp16(f.m);
  switch (type) {
    case TensorType::Q4_0: {
      kernels::BlockQ4_0 b{d, {}};
      pack_nibbles(f.q, b.qs);
      std::memcpy(dst, &b, sizeof(b));
      break;
    }
    case TensorType::Q4_1: {
      kernels::BlockQ4_1 b{d, m, {}};
      pack_nibbles(f.q, b.qs);
      std::memcpy(dst, &b, sizeof(b));
      break;
    }
    case TensorType::Q5_0: {
      kernels::BlockQ5_0 b{d, {}, {}};
      pack_fifth(f.q, b.qh);
      pack_nibbles(f.q, b.qs);
      std::memcpy(dst, &b, sizeof(b));
      break;
    }
    default: {  // Q5_1
      kernels::BlockQ5_1 b{d, m, {}, {}};
      pack_fifth(f.q, b.qh);
      pack_nibbles(f.q, b.qs);
      std::memcpy(dst, &b, sizeof(b));
      break;
    }
  }
}

double weighted_error(const float* x, const float* xr, const float* w) {
  double e = 0.0;
  for (int i = 0; i < kBlock; ++i) e += w[i] * double(x[i] - xr[i]) * double(x[i] - xr[i]);
  return e;
}

}  // namespace

bool has_weighted_search(TensorType type) {
  return type == TensorType::Q4_0 || type == TensorType::Q4_1 || type == TensorType::Q5_0 || type == TensorType::Q5_1;
}

void quantize_row_weighted(TensorType type, const float* src, void* dst, int64_t n, const float* importance) {
  if (importance == nullptr || !has_weighted_search(type)) {
    kernels::quantize_row_ref(type, src, dst, n, importance);
    return;
  }
  const int64_t block_bytes = gguf::tensor_type_info(type).bytes_per_block;
  const bool asym = type == TensorType::Q4_1 || type == TensorType::Q5_1;
  const int nmax = type == TensorType::Q4_0 || type == TensorType::Q4_1 ? 15 : 31;
  auto* out = static_cast<uint8_t*>(dst);
  float uniform[kBlock], xr[kBlock];
  std::fill(uniform, uniform + kBlock, 1.0f);
  for (int64_t b = 0; b < n / kBlock; ++b) {
    const float* x = src + b * kBlock;
    const float* w = importance + b * kBlock;
    float wsum = 0.0f;
    for (int i = 0; i < kBlock; ++i) wsum += w[i];
    if (!(wsum > 0.0f)) w = uniform;  // no information for this block
    const Fit f = asym ? search_asymmetric(x, w, nmax) : search_symmetric(x, w, nmax, (nmax + 1) / 2);
    uint8_t* block = out + b * block_bytes;
    // The reference block (plain rounding) is the fallback candidate.
    kernels::quantize_row_ref(type, x, block, kBlock);
    kernels::dequantize_row_ref(type, block, xr, kBlock);
    if (f.err < weighted_error(x, xr, w)) encode(type, f, block);
  }
}

}  // namespace tokenmill::quant
