// Reference quantizers for the legacy 32-element types and Q8_K: round to
// nearest with the block's natural scale (GGUF's standard choice), so any
// GGUF reader decodes them. Scales are rounded to fp16 before the elements
// are quantized, so the stored codes are the nearest for the stored scale.
#include <cmath>
#include <cstring>
#include <utility>

#include "kernels/legacy_codes.h"
#include "kernels/ref/quant_ref_internal.h"
#include "util/check.h"
#include "util/fp16.h"

namespace tokenmill::kernels::detail {
namespace {

// The element of largest magnitude, with its sign.
float signed_absmax(const float* x, int n) {
  float best = 0.0f;
  for (int i = 0; i < n; ++i) {
    if (std::fabs(x[i]) > std::fabs(best)) best = x[i];
  }
  return best;
}

// Stores d as fp16 and returns the value the decoder will see.
float store_half(uint16_t* dst, float d) {
  *dst = fp32_to_fp16(d);
  return fp16_to_fp32(*dst);
}

// Symmetric 32-element block: q = clamp(round(x / d) + offset, 0, 2*offset-1)
// with d = max / -offset, so the largest-magnitude element maps to code 0.
void quantize_symmetric32(const float* x, uint16_t* d_out, int offset, uint8_t* q) {
  const float max = signed_absmax(x, 32);
  const float d = store_half(d_out, max / static_cast<float>(-offset));
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  for (int j = 0; j < 32; ++j) q[j] = static_cast<uint8_t>(clamp_int(round_int(x[j] * id) + offset, 0, 2 * offset - 1));
}

// Min/max 32-element block: x ~ d * q + m, q in [0, nmax].
void quantize_minmax32(const float* x, uint16_t* d_out, uint16_t* m_out, int nmax, uint8_t* q) {
  float lo = x[0], hi = x[0];
  for (int j = 1; j < 32; ++j) {
    lo = std::fmin(lo, x[j]);
    hi = std::fmax(hi, x[j]);
  }
  const float m = store_half(m_out, lo);
  const float d = store_half(d_out, (hi - lo) / static_cast<float>(nmax));
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  for (int j = 0; j < 32; ++j) q[j] = static_cast<uint8_t>(clamp_int(round_int((x[j] - m) * id), 0, nmax));
}

void pack_nibbles(const uint8_t* q, uint8_t* qs) {
  for (int j = 0; j < 16; ++j) qs[j] = static_cast<uint8_t>((q[j] & 0x0f) | ((q[j + 16] & 0x0f) << 4));
}

void pack_fifth_bits(const uint8_t* q, uint8_t* qh_bytes) {
  uint32_t qh = 0;
  for (int j = 0; j < 32; ++j) qh |= static_cast<uint32_t>((q[j] >> 4) & 1) << j;
  std::memcpy(qh_bytes, &qh, sizeof(qh));  // little-endian host
}

// Q8 codes with d = amax / 127; returns d as the decoder sees it after
// storing it as fp16 in *d_out.
float quantize_q8_32(const float* x, uint16_t* d_out, int8_t* qs) {
  const float d = store_half(d_out, std::fabs(signed_absmax(x, 32)) / 127.0f);
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  for (int j = 0; j < 32; ++j) qs[j] = static_cast<int8_t>(clamp_int(round_int(x[j] * id), -127, 127));
  return d;
}

}  // namespace

void quantize_q4_0(const float* x, BlockQ4_0* y, int64_t nb) {
  uint8_t q[32];
  for (int64_t b = 0; b < nb; ++b, x += 32) {
    quantize_symmetric32(x, &y[b].d, 8, q);
    pack_nibbles(q, y[b].qs);
  }
}

void quantize_q4_1(const float* x, BlockQ4_1* y, int64_t nb) {
  uint8_t q[32];
  for (int64_t b = 0; b < nb; ++b, x += 32) {
    quantize_minmax32(x, &y[b].d, &y[b].m, 15, q);
    pack_nibbles(q, y[b].qs);
  }
}

void quantize_q5_0(const float* x, BlockQ5_0* y, int64_t nb) {
  uint8_t q[32];
  for (int64_t b = 0; b < nb; ++b, x += 32) {
    quantize_symmetric32(x, &y[b].d, 16, q);
    pack_nibbles(q, y[b].qs);
    pack_fifth_bits(q, y[b].qh);
  }
}

void quantize_q5_1(const float* x, BlockQ5_1* y, int64_t nb) {
  uint8_t q[32];
  for (int64_t b = 0; b < nb; ++b, x += 32) {
    quantize_minmax32(x, &y[b].d, &y[b].m, 31, q);
    pack_nibbles(q, y[b].qs);
    pack_fifth_bits(q, y[b].qh);
  }
}

void quantize_q8_0(const float* x, BlockQ8_0* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, x += 32) quantize_q8_32(x, &y[b].d, y[b].qs);
}

void quantize_q8_1(const float* x, BlockQ8_1* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, x += 32) {
    const float d = quantize_q8_32(x, &y[b].d, y[b].qs);
    int sum = 0;
    for (int j = 0; j < 32; ++j) sum += y[b].qs[j];
    y[b].s = fp32_to_fp16(d * static_cast<float>(sum));
  }
}

// Q8_K keeps d in fp32; as in Q4_0, d = max / -128 with max the signed
// element of largest magnitude, so that element takes the extra code -128.
void quantize_q8_k(const float* x, BlockQ8_K* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, x += kQK_K) {
    const float max = signed_absmax(x, kQK_K);
    if (max == 0.0f) {
      std::memset(&y[b], 0, sizeof(BlockQ8_K));
      continue;
    }
    const float iscale = -128.0f / max;
    for (int i = 0; i < kQK_K; ++i) y[b].qs[i] = static_cast<int8_t>(clamp_int(round_int(iscale * x[i]), -128, 127));
    for (int k = 0; k < 16; ++k) {
      int sum = 0;
      for (int i = 0; i < 16; ++i) sum += y[b].qs[16 * k + i];
      y[b].bsums[k] = static_cast<int16_t>(sum);
    }
    y[b].d = 1.0f / iscale;
  }
}

}  // namespace tokenmill::kernels::detail

namespace tokenmill::kernels {

void pack_legacy_block(gguf::TensorType type, uint16_t d, uint16_t m, const int* codes, void* dst) {
  using gguf::TensorType;
  const auto [lo, hi] = [type]() -> std::pair<int, int> {
    switch (type) {
      case TensorType::Q4_0:
      case TensorType::Q4_1: return {0, 15};
      case TensorType::Q5_0:
      case TensorType::Q5_1: return {0, 31};
      case TensorType::Q8_0: return {-128, 127};
      default: return {1, 0};
    }
  }();
  TM_CHECK_MSG(lo <= hi, "pack_legacy_block: not a legacy block type");
  uint8_t q[32];
  for (int j = 0; j < 32; ++j) {
    TM_CHECK_MSG(codes[j] >= lo && codes[j] <= hi, "pack_legacy_block: code out of range");
    q[j] = static_cast<uint8_t>(codes[j]);
  }
  switch (type) {
    case TensorType::Q4_0: {
      auto* b = static_cast<BlockQ4_0*>(dst);
      b->d = d;
      detail::pack_nibbles(q, b->qs);
      return;
    }
    case TensorType::Q4_1: {
      auto* b = static_cast<BlockQ4_1*>(dst);
      b->d = d, b->m = m;
      detail::pack_nibbles(q, b->qs);
      return;
    }
    case TensorType::Q5_0: {
      auto* b = static_cast<BlockQ5_0*>(dst);
      b->d = d;
      detail::pack_nibbles(q, b->qs);
      detail::pack_fifth_bits(q, b->qh);
      return;
    }
    case TensorType::Q5_1: {
      auto* b = static_cast<BlockQ5_1*>(dst);
      b->d = d, b->m = m;
      detail::pack_nibbles(q, b->qs);
      detail::pack_fifth_bits(q, b->qh);
      return;
    }
    default: {
      auto* b = static_cast<BlockQ8_0*>(dst);
      b->d = d;
      for (int j = 0; j < 32; ++j) b->qs[j] = static_cast<int8_t>(codes[j]);
      return;
    }
  }
}

}  // namespace tokenmill::kernels
