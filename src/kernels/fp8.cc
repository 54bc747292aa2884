#include "kernels/fp8.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

#include "kernels/dispatch.h"
#include "util/check.h"

namespace tokenmill::kernels {

float fp8_e4m3_to_fp32(uint8_t b) {
  const float sign = (b & 0x80) ? -1.0f : 1.0f;
  const int e = (b >> 3) & 15;
  const int m = b & 7;
  if (e == 15 && m == 7) return std::numeric_limits<float>::quiet_NaN();
  if (e == 0) return sign * std::ldexp(static_cast<float>(m), -9);  // m/8 * 2^-6
  return sign * std::ldexp(1.0f + static_cast<float>(m) / 8.0f, e - 7);
}

uint8_t fp32_to_fp8_e4m3(float f) {
  if (std::isnan(f)) return 0x7F;
  const uint8_t sign = std::signbit(f) ? 0x80 : 0x00;
  const float a = std::fabs(f);
  if (a >= kFp8E4M3Max) return sign | 0x7E;
  if (a < 0.015625f) {  // below 2^-6: subnormal grid of step 2^-9 (8 maps to the smallest normal)
    return sign | static_cast<uint8_t>(std::nearbyint(a * 512.0f));
  }
  // Normal: keep 3 mantissa bits, rounding the 20 dropped bits to nearest even.
  uint32_t bits = std::bit_cast<uint32_t>(a);
  bits += 0x7FFFF + ((bits >> 20) & 1);
  const uint32_t code = (bits >> 20) - ((127 - 7) << 3);
  return sign | static_cast<uint8_t>(std::min<uint32_t>(code, 0x7E));
}

int fp8_block_exponent(float amax) {
  if (!(amax > 0.0f)) return 0;
  int k = static_cast<int>(std::ceil(std::log2(amax / kFp8E4M3Max)));
  // log2 rounding can land one off either way; settle on the exact bound.
  while (std::ldexp(kFp8E4M3Max, k) < amax) ++k;
  while (std::ldexp(kFp8E4M3Max, k - 1) >= amax) --k;
  return std::clamp(k, -127, 119);  // 2^(k + 8) must stay a normal float (fp8_avx2.cc)
}

void quantize_row_fp8(const float* src, Fp8Block* dst, int64_t n) {
  TM_CHECK(n % kFp8Block == 0);
  for (int64_t b = 0; b < n / kFp8Block; ++b) {
    const float* x = src + b * kFp8Block;
    float amax = 0.0f;
    for (int i = 0; i < kFp8Block; ++i) amax = std::max(amax, std::fabs(x[i]));
    const int k = fp8_block_exponent(amax);
    dst[b].exp = static_cast<int8_t>(k);
    for (int i = 0; i < kFp8Block; ++i) dst[b].qs[i] = fp32_to_fp8_e4m3(std::ldexp(x[i], -k));
  }
}

void dequantize_row_fp8(const Fp8Block* src, float* dst, int64_t n) {
  TM_CHECK(n % kFp8Block == 0);
  for (int64_t b = 0; b < n / kFp8Block; ++b) {
    for (int i = 0; i < kFp8Block; ++i) {
      dst[b * kFp8Block + i] = std::ldexp(fp8_e4m3_to_fp32(src[b].qs[i]), src[b].exp);
    }
  }
}

void round_row_to_fp8(const float* src, float* dst, int64_t n) {
  TM_CHECK(n % kFp8Block == 0);
  Fp8Block block;
  for (int64_t b = 0; b < n / kFp8Block; ++b) {
    quantize_row_fp8(src + b * kFp8Block, &block, kFp8Block);
    dequantize_row_fp8(&block, dst + b * kFp8Block, kFp8Block);
  }
}

namespace {

// The 256 E4M3 values, for the scalar path.
struct Fp8Table {
  float v[256];
  Fp8Table() {
    for (int i = 0; i < 256; ++i) v[i] = fp8_e4m3_to_fp32(static_cast<uint8_t>(i));
  }
};
const Fp8Table& table() {
  static const Fp8Table t;
  return t;
}

}  // namespace

void matmul_fp8_rows_ref(const Fp8Matrix& w, int64_t row_begin, int64_t row_end, const float* x, int64_t num_tokens,
                         float* y) {
  const float* lut = table().v;
  const int64_t nb = w.cols / kFp8Block;
  for (int64_t r = row_begin; r < row_end; ++r) {
    const Fp8Block* row = w.blocks + r * nb;
    for (int64_t t = 0; t < num_tokens; ++t) {
      const float* xt = x + t * w.cols;
      float acc = 0.0f;
      for (int64_t b = 0; b < nb; ++b) {
        float s = 0.0f;
        for (int i = 0; i < kFp8Block; ++i) s += lut[row[b].qs[i]] * xt[b * kFp8Block + i];
        acc += std::ldexp(s, row[b].exp);
      }
      y[t * w.rows + r] = acc;
    }
  }
}

void matmul_fp8_ref(const Fp8Matrix& w, const float* x, int64_t num_tokens, float* y) {
  TM_CHECK(w.cols % kFp8Block == 0);
  matmul_fp8_rows_ref(w, 0, w.rows, x, num_tokens, y);
}

void matmul_fp8(const Fp8Matrix& w, const float* x, int64_t num_tokens, float* y, ThreadPool& pool) {
  TM_CHECK(w.cols % kFp8Block == 0 && w.blocks != nullptr);
  const auto rows = active_kernels().fp8_rows;
  // Token tiles of 4 keep a tile of x in L1 while each weight row is decoded
  // once per tile.
  constexpr int64_t kTile = 4;
  pool.parallel_for(w.rows, [&](int, int64_t begin, int64_t end) {
    for (int64_t t0 = 0; t0 < num_tokens; t0 += kTile) {
      const int64_t nt = std::min(kTile, num_tokens - t0);
      // Outputs of tokens t0.. are written at y + t0 * rows; same row stride.
      rows(w, begin, end, x + t0 * w.cols, nt, y + t0 * w.rows);
    }
  });
}

}  // namespace tokenmill::kernels
