// Scalar dequantization of the K-quant super-blocks (256 elements each).
// The bit layouts are documented on the structs in quant_blocks.h.
#include "kernels/ref/quant_ref_internal.h"
#include "util/fp16.h"

namespace tokenmill::kernels::detail {
namespace {

// Unpacks Q4_K/Q5_K's twelve bytes into 8 six-bit scales and mins.
void unpack_scales_k4(const uint8_t* s, uint8_t* sc, uint8_t* mn) {
  for (int k = 0; k < 4; ++k) {
    sc[k] = s[k] & 63;
    mn[k] = s[k + 4] & 63;
    sc[k + 4] = static_cast<uint8_t>((s[k + 8] & 0x0f) | ((s[k] >> 6) << 4));
    mn[k + 4] = static_cast<uint8_t>((s[k + 8] >> 4) | ((s[k + 4] >> 6) << 4));
  }
}

// Unpacks Q3_K's twelve bytes into 16 signed scales (6-bit value - 32).
void unpack_scales_q3(const uint8_t* s, int* sc) {
  for (int k = 0; k < 16; ++k) {
    const int lo = k < 8 ? (s[k] & 0x0f) : (s[k - 8] >> 4);
    const int hi = (s[8 + k % 4] >> (2 * (k / 4))) & 3;
    sc[k] = (lo | (hi << 4)) - 32;
  }
}

}  // namespace

void dequantize_q2_k(const BlockQ2_K* x, float* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b) {
    const float d = fp16_to_fp32(x[b].d);
    const float dmin = fp16_to_fp32(x[b].dmin);
    for (int h = 0; h < 2; ++h) {
      const uint8_t* q = x[b].qs + 32 * h;
      for (int t = 0; t < 4; ++t, y += 32) {
        for (int part = 0; part < 2; ++part) {
          const uint8_t sc = x[b].scales[8 * h + 2 * t + part];
          const float dl = d * static_cast<float>(sc & 0x0f);
          const float ml = dmin * static_cast<float>(sc >> 4);
          for (int i = 16 * part; i < 16 * part + 16; ++i) {
            y[i] = dl * static_cast<float>((q[i] >> (2 * t)) & 3) - ml;
          }
        }
      }
    }
  }
}

void dequantize_q3_k(const BlockQ3_K* x, float* y, int64_t nb) {
  int sc[16];
  for (int64_t b = 0; b < nb; ++b) {
    const float d = fp16_to_fp32(x[b].d);
    unpack_scales_q3(x[b].scales, sc);
    for (int h = 0; h < 2; ++h) {
      const uint8_t* q = x[b].qs + 32 * h;
      for (int t = 0; t < 4; ++t, y += 32) {
        const int bit = 4 * h + t;
        for (int part = 0; part < 2; ++part) {
          const float dl = d * static_cast<float>(sc[8 * h + 2 * t + part]);
          for (int i = 16 * part; i < 16 * part + 16; ++i) {
            const int lo = (q[i] >> (2 * t)) & 3;
            const int high_off = ((x[b].hmask[i] >> bit) & 1) ? 0 : 4;
            y[i] = dl * static_cast<float>(lo - high_off);
          }
        }
      }
    }
  }
}

void dequantize_q4_k(const BlockQ4_K* x, float* y, int64_t nb) {
  uint8_t sc[8], mn[8];
  for (int64_t b = 0; b < nb; ++b) {
    const float d = fp16_to_fp32(x[b].d);
    const float dmin = fp16_to_fp32(x[b].dmin);
    unpack_scales_k4(x[b].scales, sc, mn);
    for (int k = 0; k < 8; ++k, y += 32) {
      const float dl = d * static_cast<float>(sc[k]);
      const float ml = dmin * static_cast<float>(mn[k]);
      const uint8_t* q = x[b].qs + 32 * (k / 2);
      const int shift = 4 * (k & 1);
      for (int i = 0; i < 32; ++i) y[i] = dl * static_cast<float>((q[i] >> shift) & 0x0f) - ml;
    }
  }
}

void dequantize_q5_k(const BlockQ5_K* x, float* y, int64_t nb) {
  uint8_t sc[8], mn[8];
  for (int64_t b = 0; b < nb; ++b) {
    const float d = fp16_to_fp32(x[b].d);
    const float dmin = fp16_to_fp32(x[b].dmin);
    unpack_scales_k4(x[b].scales, sc, mn);
    for (int k = 0; k < 8; ++k, y += 32) {
      const float dl = d * static_cast<float>(sc[k]);
      const float ml = dmin * static_cast<float>(mn[k]);
      const uint8_t* q = x[b].qs + 32 * (k / 2);
      const int shift = 4 * (k & 1);
      for (int i = 0; i < 32; ++i) {
        const int v = ((q[i] >> shift) & 0x0f) | (((x[b].qh[i] >> k) & 1) << 4);
        y[i] = dl * static_cast<float>(v) - ml;
      }
    }
  }
}

void dequantize_q6_k(const BlockQ6_K* x, float* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b) {
    const float d = fp16_to_fp32(x[b].d);
    for (int h = 0; h < 2; ++h) {
      const uint8_t* ql = x[b].ql + 64 * h;
      const uint8_t* qh = x[b].qh + 32 * h;
      for (int t = 0; t < 4; ++t, y += 32) {
        const uint8_t* l4 = ql + 32 * (t & 1);
        const int shift = t < 2 ? 0 : 4;
        for (int part = 0; part < 2; ++part) {
          const float dl = d * static_cast<float>(x[b].scales[8 * h + 2 * t + part]);
          for (int i = 16 * part; i < 16 * part + 16; ++i) {
            const int v = ((l4[i] >> shift) & 0x0f) | (((qh[i] >> (2 * t)) & 3) << 4);
            y[i] = dl * static_cast<float>(v - 32);
          }
        }
      }
    }
  }
}

void dequantize_q8_k(const BlockQ8_K* x, float* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, y += kQK_K) {
    for (int i = 0; i < kQK_K; ++i) y[i] = x[b].d * static_cast<float>(x[b].qs[i]);
  }
}

}  // namespace tokenmill::kernels::detail
