// Reference K-quant quantizers. Each super-block is fitted in three steps:
// (1) per sub-block, a weighted least-squares scale (and min) search
// (quantize_ref_search.cc); (2) those scales are themselves quantized
// against one fp16 super-scale; (3) every element is re-rounded against the
// scale the decoder will actually see, so codes are consistent with it.
// Weights are the caller's importance (or uniform); see search_weights.
#include <cmath>
#include <cstring>

#include "kernels/ref/quant_ref_internal.h"
#include "util/fp16.h"

namespace tokenmill::kernels::detail {
namespace {

// Quantizes non-negative values v[0..count) to codes 0..max_code against
// one fp16 scale; stores the scale in *d_out and returns it as decoded.
float quantize_unsigned_scales(const float* v, int count, int max_code, uint16_t* d_out, uint8_t* codes) {
  float vmax = 0.0f;
  for (int k = 0; k < count; ++k) vmax = std::fmax(vmax, v[k]);
  *d_out = fp32_to_fp16(vmax / static_cast<float>(max_code));
  if (*d_out == 0 && vmax > 0.0f) *d_out = 1;  // underflow: smallest subnormal beats flushing to zero
  const float d = fp16_to_fp32(*d_out);
  const float id = d > 0.0f ? 1.0f / d : 0.0f;
  for (int k = 0; k < count; ++k) codes[k] = static_cast<uint8_t>(clamp_int(round_int(v[k] * id), 0, max_code));
  return d;
}

// Signed counterpart: codes in [-(max_code + 1), max_code], the value of
// largest magnitude mapping to -(max_code + 1). Codes are rounded against
// the stored (fp16) scale.
float quantize_signed_scales(const float* v, int count, int max_code, uint16_t* d_out, int* codes) {
  float vmax = 0.0f;
  for (int k = 0; k < count; ++k) {
    if (std::fabs(v[k]) > std::fabs(vmax)) vmax = v[k];
  }
  *d_out = fp32_to_fp16(vmax / -static_cast<float>(max_code + 1));
  if ((*d_out & 0x7fff) == 0 && vmax != 0.0f) *d_out = vmax > 0.0f ? 0x8001 : 0x0001;  // underflow
  const float d = fp16_to_fp32(*d_out);
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  for (int k = 0; k < count; ++k) codes[k] = clamp_int(round_int(v[k] * id), -(max_code + 1), max_code);
  return d;
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

// Re-rounds x [n] against x ~ dl * (q - nmax) and returns the weighted
// squared error.
float reround_sym_error(const float* x, const float* w, int n, float dl, int nmax, uint8_t* q) {
  reround_sym(x, n, dl, nmax, q);
  float err = 0.0f;
  for (int i = 0; i < n; ++i) {
    const float diff = dl * static_cast<float>(q[i] - nmax) - x[i];
    err += w[i] * diff * diff;
  }
  return err;
}

// Symmetric counterpart of refine_codes_asym: tries the scale codes one
// step around *sc (within [-(max_code + 1), max_code]). Updates *sc and q.
void refine_code_sym(const float* x, const float* w, int n, int nmax, float d, int max_code, int* sc, uint8_t* q) {
  uint8_t trial[16];
  float best = reround_sym_error(x, w, n, d * static_cast<float>(*sc), nmax, q);
  const int sc0 = *sc;
  for (int s = sc0 - 1; s <= sc0 + 1; s += 2) {
    if (s < -(max_code + 1) || s > max_code) continue;
    const float err = reround_sym_error(x, w, n, d * static_cast<float>(s), nmax, trial);
    if (err < best) {
      best = err;
      *sc = s;
      for (int i = 0; i < n; ++i) q[i] = trial[i];
    }
  }
}

// Weighted squared error of x [n] ~ dl * q - ml after re-rounding q.
float reround_asym_error(const float* x, const float* w, int n, float dl, float ml, int nmax, uint8_t* q) {
  reround_asym(x, n, dl, ml, nmax, q);
  float err = 0.0f;
  for (int i = 0; i < n; ++i) {
    const float diff = dl * static_cast<float>(q[i]) - ml - x[i];
    err += w[i] * diff * diff;
  }
  return err;
}

// Rounding each sub-block's scale and min to the nearest code is not always
// best once the elements are re-rounded; tries the codes one step around
// them and keeps the pair with the least weighted error. Updates sc, mn, q.
void refine_codes_asym(const float* x, const float* w, int n, int nmax, float d, float dmin, int max_code, uint8_t* sc,
                       uint8_t* mn, uint8_t* q) {
  uint8_t trial[32];
  float best = reround_asym_error(x, w, n, d * sc[0], dmin * mn[0], nmax, q);
  const int sc0 = sc[0], mn0 = mn[0];
  for (int ds = -1; ds <= 1; ++ds) {
    for (int dm = -1; dm <= 1; ++dm) {
      const int s = sc0 + ds, m = mn0 + dm;
      if ((ds == 0 && dm == 0) || s < 0 || s > max_code || m < 0 || m > max_code) continue;
      const float err = reround_asym_error(x, w, n, d * s, dmin * m, nmax, trial);
      if (err < best) {
        best = err;
        sc[0] = static_cast<uint8_t>(s);
        mn[0] = static_cast<uint8_t>(m);
        for (int i = 0; i < n; ++i) q[i] = trial[i];
      }
    }
  }
  // The min that is optimal for the chosen codes, rounded to its code.
  float sw = 0.0f, sr = 0.0f;
  for (int i = 0; i < n; ++i) {
    sw += w[i];
    sr += w[i] * (d * sc[0] * static_cast<float>(q[i]) - x[i]);
  }
  const int m = dmin > 0.0f ? clamp_int(round_int(sr / sw / dmin), 0, max_code) : 0;
  if (m != mn[0] && reround_asym_error(x, w, n, d * sc[0], dmin * m, nmax, trial) < best) {
    mn[0] = static_cast<uint8_t>(m);
    for (int i = 0; i < n; ++i) q[i] = trial[i];
  }
}

// Weighted squared error of the whole super-block x [256] ~
// d * sc[k] * q - dmin * mn[k] (k = sub-block of the element).
float super_error_asym(const float* x, const float* w, int sub, float d, float dmin, const uint8_t* sc,
                       const uint8_t* mn, const uint8_t* q) {
  float err = 0.0f;
  for (int i = 0; i < kQK_K; ++i) {
    const float diff =
        d * static_cast<float>(sc[i / sub]) * static_cast<float>(q[i]) - dmin * static_cast<float>(mn[i / sub]) - x[i];
    err += w[i] * diff * diff;
  }
  return err;
}

// With the integer codes fixed, d and dmin enter linearly: solves the 2x2
// weighted least-squares problem for them, re-rounds the elements against
// the fp16-stored result, and keeps it if the error drops.
void refit_super_asym(const float* x, const float* w, int sub, int nmax, const uint8_t* sc, const uint8_t* mn,
                      uint16_t* d_out, uint16_t* dmin_out, uint8_t* q) {
  double saa = 0, sab = 0, sbb = 0, sax = 0, sbx = 0;
  for (int i = 0; i < kQK_K; ++i) {
    const double a = static_cast<double>(sc[i / sub]) * q[i], b = mn[i / sub];
    saa += w[i] * a * a;
    sab += w[i] * a * b;
    sbb += w[i] * b * b;
    sax += w[i] * a * x[i];
    sbx += w[i] * b * x[i];
  }
  const double det = saa * sbb - sab * sab;
  if (!(det > 0.0)) return;
  // Minimise sum w (d a - m b - x)^2: [saa -sab; -sab sbb] [d; m] = [sax; -sbx].
  const double d = (sax * sbb - sab * sbx) / det;
  const double m = (sab * sax - saa * sbx) / det;
  if (!(d > 0.0) || m < 0.0) return;
  const uint16_t dh = fp32_to_fp16(static_cast<float>(d)), mh = fp32_to_fp16(static_cast<float>(m));
  const float new_d = fp16_to_fp32(dh), new_m = fp16_to_fp32(mh);
  uint8_t trial[kQK_K];
  for (int k = 0; k < kQK_K / sub; ++k) {
    reround_asym(x + k * sub, sub, new_d * sc[k], new_m * mn[k], nmax, trial + k * sub);
  }
  const float old_err = super_error_asym(x, w, sub, fp16_to_fp32(*d_out), fp16_to_fp32(*dmin_out), sc, mn, q);
  if (super_error_asym(x, w, sub, new_d, new_m, sc, mn, trial) < old_err) {
    *d_out = dh;
    *dmin_out = mh;
    std::memcpy(q, trial, kQK_K);
  }
}

// Fits the sub-blocks of one super-block asymmetrically and quantizes the
// scales and mins to `scale_bits` codes against fp16 d/dmin. Fills codes
// q [256] (0..nmax), sc and mn [256 / sub].
void fit_asym_superblock(const float* x, const float* importance, int sub, int nmax, int scale_bits, uint16_t* d_out,
                         uint16_t* dmin_out, uint8_t* sc, uint8_t* mn, uint8_t* q) {
  const int num_sub = kQK_K / sub;
  float scales[16] = {}, mins[16] = {}, w[kQK_K];
  for (int k = 0; k < num_sub; ++k) {
    search_weights(importance != nullptr ? importance + k * sub : nullptr, sub, w + k * sub);
    scales[k] = fit_asymmetric(x + k * sub, w + k * sub, sub, nmax, q + k * sub, &mins[k]);
  }
  const int max_code = (1 << scale_bits) - 1;
  const float d = quantize_unsigned_scales(scales, num_sub, max_code, d_out, sc);
  const float dmin = quantize_unsigned_scales(mins, num_sub, max_code, dmin_out, mn);
  for (int k = 0; k < num_sub; ++k) {
    refine_codes_asym(x + k * sub, w + k * sub, sub, nmax, d, dmin, max_code, sc + k, mn + k, q + k * sub);
  }
  refit_super_asym(x, w, sub, nmax, sc, mn, d_out, dmin_out, q);
}

// Fits the 16 sub-blocks of one super-block symmetrically (codes
// q [256] in 0..2*nmax-1) and quantizes their scales to signed codes
// sc [16] against the fp16 *d_out, which it returns decoded. Also returns
// the search weights w [256] for later refinement.
float fit_sym_superblock(const float* x, const float* importance, int nmax, int max_code, uint16_t* d_out, int* sc,
                         uint8_t* q, float* w) {
  float scales[16];
  for (int k = 0; k < 16; ++k) {
    search_weights(importance != nullptr ? importance + 16 * k : nullptr, 16, w + 16 * k);
    scales[k] = fit_symmetric(x + 16 * k, w + 16 * k, 16, nmax, q + 16 * k);
  }
  return quantize_signed_scales(scales, 16, max_code, d_out, sc);
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
        if ((k & 1) == 0)
          y[b].qs[16 * k + i] = v & 0x0f;
        else
          y[b].qs[16 * (k - 1) + i] |= static_cast<uint8_t>((v & 0x0f) << 4);
        y[b].qh[i] |= static_cast<uint8_t>((v >> 4) << k);
      }
    }
  }
}

void quantize_q3_k(const float* x, BlockQ3_K* y, int64_t nb, const float* importance) {
  uint8_t q[kQK_K];
  int sc[16];
  for (int64_t b = 0; b < nb; ++b, x += kQK_K) {
    float w[kQK_K];
    const float d =
        fit_sym_superblock(x, importance != nullptr ? importance + b * kQK_K : nullptr, 4, 31, &y[b].d, sc, q, w);
    std::memset(y[b].scales, 0, sizeof(y[b].scales));
    for (int k = 0; k < 16; ++k) {
      refine_code_sym(x + 16 * k, w + 16 * k, 16, 4, d, 31, sc + k, q + 16 * k);
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
  int sc[16];
  for (int64_t b = 0; b < nb; ++b, x += kQK_K) {
    float w[kQK_K];
    const float d =
        fit_sym_superblock(x, importance != nullptr ? importance + b * kQK_K : nullptr, 32, 127, &y[b].d, sc, q, w);
    for (int k = 0; k < 16; ++k) {
      refine_code_sym(x + 16 * k, w + 16 * k, 16, 32, d, 127, sc + k, q + 16 * k);
      y[b].scales[k] = static_cast<int8_t>(sc[k]);
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
