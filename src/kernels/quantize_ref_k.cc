// Reference K-quant quantizers. Each super-block is fitted in three steps:
// (1) per sub-block, a weighted least-squares scale (and min) search
// (quantize_ref_search.cc); (2) those scales are themselves quantized
// against one fp16 super-scale; (3) every element is re-rounded against the
// scale the decoder will actually see, so codes are consistent with it.
// Weights are the caller's importance (or uniform); see search_weights.
#include <cmath>
#include <cstring>

#include "kernels/quant_ref_internal.h"
#include "util/fp16.h"

namespace tokenmill::kernels::detail {
namespace {

// Quantizes non-negative values v[0..count) to codes 0..max_code against
// one fp16 scale; stores the scale in *d_out and returns it as decoded.
float quantize_unsigned_scales(const float* v, int count, int max_code, uint16_t* d_out, uint8_t* codes) {
  float vmax = 0.0f;
  for (int k = 0; k < count; ++k) vmax = std::fmax(vmax, v[k]);
  *d_out = fp32_to_fp16(vmax / static_cast<float>(max_code));
  const float d = fp16_to_fp32(*d_out);
  const float id = d > 0.0f ? 1.0f / d : 0.0f;
  for (int k = 0; k < count; ++k) codes[k] = static_cast<uint8_t>(clamp_int(round_int(v[k] * id), 0, max_code));
  return d;
}

// Signed counterpart: codes in [-(max_code + 1), max_code], the value of
// largest magnitude mapping to -(max_code + 1).
float quantize_signed_scales(const float* v, int count, int max_code, uint16_t* d_out, int* codes) {
  float vmax = 0.0f;
  for (int k = 0; k < count; ++k) {
    if (std::fabs(v[k]) > std::fabs(vmax)) vmax = v[k];
  }
  if (vmax == 0.0f) {
    *d_out = 0;
    for (int k = 0; k < count; ++k) codes[k] = 0;
    return 0.0f;
  }
  const float iscale = -static_cast<float>(max_code + 1) / vmax;
  for (int k = 0; k < count; ++k) codes[k] = clamp_int(round_int(iscale * v[k]), -(max_code + 1), max_code);
  *d_out = fp32_to_fp16(1.0f / iscale);
  return fp16_to_fp32(*d_out);
}

// Re-rounds x [n] against x ~ dl * q - ml, q in [0, nmax].
void reround_asym(const float* x, int n, float dl, float ml, int nmax, uint8_t* q) {
  const float id = dl != 0.0f ? 1.0f / dl : 0.0f;
  for (int i = 0; i < n; ++i) q[i] = static_cast<uint8_t>(clamp_int(round_int((x[i] + ml) * id), 0, nmax));
}

// Re-rounds x [n] against x ~ dl * (q - nmax), q in [0, 2 * nmax - 1].
void reround_sym(const float* x, int n, float dl, int nmax, uint8_t* q) {
  const float id = dl != 0.0f ? 1.0f / dl : 0.0f;
  for (int i = 0; i < n; ++i) q[i] = static_cast<uint8_t>(clamp_int(round_int(x[i] * id), -nmax, nmax - 1) + nmax);
}

// Fits the sub-blocks of one super-block asymmetrically and quantizes the
// scales and mins to `scale_bits` codes against fp16 d/dmin. Fills codes
// q [256] (0..nmax), sc and mn [num_sub].
void fit_asym_superblock(const float* x, const float* importance, int sub, int nmax, int scale_bits,
                         uint16_t* d_out, uint16_t* dmin_out, uint8_t* sc, uint8_t* mn, uint8_t* q) {
  const int num_sub = kQK_K / sub;
  float scales[16], mins[16], w[32];
  for (int k = 0; k < num_sub; ++k) {
    search_weights(importance != nullptr ? importance + k * sub : nullptr, sub, w);
    scales[k] = fit_asymmetric(x + k * sub, w, sub, nmax, q + k * sub, &mins[k]);
  }
  const int max_code = (1 << scale_bits) - 1;
  const float d = quantize_unsigned_scales(scales, num_sub, max_code, d_out, sc);
  const float dmin = quantize_unsigned_scales(mins, num_sub, max_code, dmin_out, mn);
  for (int k = 0; k < num_sub; ++k) {
    reround_asym(x + k * sub, sub, d * static_cast<float>(sc[k]), dmin * static_cast<float>(mn[k]), nmax, q + k * sub);
  }
}

void pack_scales_k4(const uint8_t* sc, const uint8_t* mn, uint8_t* s) {
  for (int k = 0; k < 4; ++k) {
    s[k] = static_cast<uint8_t>(sc[k] | ((sc[k + 4] >> 4) << 6));
    s[k + 4] = static_cast<uint8_t>(mn[k] | ((mn[k + 4] >> 4) << 6));
    s[k + 8] = static_cast<uint8_t>((sc[k + 4] & 0x0f) | ((mn[k + 4] & 0x0f) << 4));
  }
}

// Two-bit codes in Q2_K/Q3_K order: element e -> qs[32 (e / 128) + e % 32]
// at bit 2 ((e % 128) / 32).
void pack_2bit(const uint8_t* q, uint8_t* qs) {
  std::memset(qs, 0, 64);
  for (int e = 0; e < kQK_K; ++e) {
    qs[32 * (e / 128) + e % 32] |= static_cast<uint8_t>((q[e] & 3) << (2 * ((e % 128) / 32)));
  }
}

}  // namespace

void quantize_q2_k(const float* x, BlockQ2_K* y, int64_t nb, const float* importance) {
  uint8_t q[kQK_K], sc[16], mn[16];
  for (int64_t b = 0; b < nb; ++b, x += kQK_K) {
    const float* imp = importance != nullptr ? importance + b * kQK_K : nullptr;
    fit_asym_superblock(x, imp, 16, 3, 4, &y[b].d, &y[b].dmin, sc, mn, q);
    for (int k = 0; k < 16; ++k) y[b].scales[k] = static_cast<uint8_t>(sc[k] | (mn[k] << 4));
    pack_2bit(q, y[b].qs);
  }
}

void quantize_q4_k(const float* x, BlockQ4_K* y, int64_t nb, const float* importance) {
  uint8_t q[kQK_K], sc[8], mn[8];
  for (int64_t b = 0; b < nb; ++b, x += kQK_K) {
    const float* imp = importance != nullptr ? importance + b * kQK_K : nullptr;
    fit_asym_superblock(x, imp, 32, 15, 6, &y[b].d, &y[b].dmin, sc, mn, q);
    pack_scales_k4(sc, mn, y[b].scales);
    for (int k = 0; k < 8; k += 2) {
      for (int i = 0; i < 32; ++i) {
        y[b].qs[16 * k + i] = static_cast<uint8_t>(q[32 * k + i] | (q[32 * (k + 1) + i] << 4));
      }
    }
  }
}

void quantize_q5_k(const float* x, BlockQ5_K* y, int64_t nb, const float* importance) {
  uint8_t q[kQK_K], sc[8], mn[8];
  for (int64_t b = 0; b < nb; ++b, x += kQK_K) {
    const float* imp = importance != nullptr ? importance + b * kQK_K : nullptr;
    fit_asym_superblock(x, imp, 32, 31, 6, &y[b].d, &y[b].dmin, sc, mn, q);
    pack_scales_k4(sc, mn, y[b].scales);
    std::memset(y[b].qh, 0, sizeof(y[b].qh));
    for (int k = 0; k < 8; ++k) {
      for (int i = 0; i < 32; ++i) {
        const uint8_t v = q[32 * k + i];
        if ((k & 1) == 0) y[b].qs[16 * k + i] = v & 0x0f;
        else y[b].qs[16 * (k - 1) + i] |= static_cast<uint8_t>((v & 0x0f) << 4);
        y[b].qh[i] |= static_cast<uint8_t>((v >> 4) << k);
      }
    }
  }
}

void quantize_q3_k(const float* x, BlockQ3_K* y, int64_t nb, const float* importance) {
  uint8_t q[kQK_K];
  float scales[16], w[16];
  int sc[16];
  for (int64_t b = 0; b < nb; ++b, x += kQK_K) {
    for (int k = 0; k < 16; ++k) {
      search_weights(importance != nullptr ? importance + b * kQK_K + 16 * k : nullptr, 16, w);
      scales[k] = fit_symmetric(x + 16 * k, w, 16, 4, q + 16 * k);
    }
    const float d = quantize_signed_scales(scales, 16, 31, &y[b].d, sc);
    std::memset(y[b].scales, 0, sizeof(y[b].scales));
    for (int k = 0; k < 16; ++k) {
      reround_sym(x + 16 * k, 16, d * static_cast<float>(sc[k]), 4, q + 16 * k);
      const int u = sc[k] + 32;  // 6-bit biased code
      y[b].scales[k % 8] |= static_cast<uint8_t>((u & 0x0f) << (k < 8 ? 0 : 4));
      y[b].scales[8 + k % 4] |= static_cast<uint8_t>((u >> 4) << (2 * (k / 4)));
    }
    std::memset(y[b].hmask, 0, sizeof(y[b].hmask));
    for (int e = 0; e < kQK_K; ++e) y[b].hmask[e % 32] |= static_cast<uint8_t>((q[e] >> 2) << (e / 32));
    pack_2bit(q, y[b].qs);
  }
}

void quantize_q6_k(const float* x, BlockQ6_K* y, int64_t nb, const float* importance) {
  uint8_t q[kQK_K];
  float scales[16], w[16];
  int sc[16];
  for (int64_t b = 0; b < nb; ++b, x += kQK_K) {
    for (int k = 0; k < 16; ++k) {
      search_weights(importance != nullptr ? importance + b * kQK_K + 16 * k : nullptr, 16, w);
      scales[k] = fit_symmetric(x + 16 * k, w, 16, 32, q + 16 * k);
    }
    const float d = quantize_signed_scales(scales, 16, 127, &y[b].d, sc);
    for (int k = 0; k < 16; ++k) {
      y[b].scales[k] = static_cast<int8_t>(sc[k]);
      reround_sym(x + 16 * k, 16, d * static_cast<float>(sc[k]), 32, q + 16 * k);
    }
    std::memset(y[b].ql, 0, sizeof(y[b].ql));
    std::memset(y[b].qh, 0, sizeof(y[b].qh));
    for (int e = 0; e < kQK_K; ++e) {
      const int h = e / 128, t = (e % 128) / 32, i = e % 32;
      y[b].ql[64 * h + i + 32 * (t & 1)] |= static_cast<uint8_t>((q[e] & 0x0f) << (t < 2 ? 0 : 4));
      y[b].qh[32 * h + i] |= static_cast<uint8_t>((q[e] >> 4) << (2 * t));
    }
  }
}

}  // namespace tokenmill::kernels::detail
