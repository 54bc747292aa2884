#include "kernels/interleave.h"

#include <cstring>

#include "util/check.h"

namespace tokenmill::kernels {

namespace {

// Q4_K's 12 bytes of packed 6-bit scales and minimums (quant_blocks.h).
void unpack_scales_mins(const uint8_t* q, uint8_t sc[8], uint8_t mn[8]) {
  for (int j = 0; j < 4; ++j) {
    sc[j] = q[j] & 63;
    mn[j] = q[j + 4] & 63;
    sc[j + 4] = static_cast<uint8_t>((q[j + 8] & 15) | ((q[j] >> 6) << 4));
    mn[j + 4] = static_cast<uint8_t>((q[j + 8] >> 4) | ((q[j + 4] >> 6) << 4));
  }
}

void interleave_q4_k(const WeightView& w, uint8_t* dst) {
  constexpr int64_t kBlockBytes = 144;  // d, dmin, 12 bytes of scales, 128 bytes of nibbles
  const int64_t supers = w.cols / 256;
  const auto* src = static_cast<const uint8_t*>(w.data);
  for (int64_t r = 0; r < w.rows; ++r) {
    const int64_t g = r / kInterleaveRows, i = r % kInterleaveRows;
    for (int64_t s = 0; s < supers; ++s) {
      const uint8_t* in = src + (r * supers + s) * kBlockBytes;
      uint8_t* out = dst + (g * supers + s) * kQ4_Kx16BlockBytes;
      for (int64_t k = 0; k < 4; ++k) {
        for (int64_t p = 0; p < 16; ++p) std::memcpy(out + 512 * k + 32 * p + 2 * i, in + 16 + 32 * k + 2 * p, 2);
      }
      std::memcpy(out + kQ4_Kx16Scales + 2 * i, in, 2);
      std::memcpy(out + kQ4_Kx16Scales + 32 + 2 * i, in + 2, 2);
      uint8_t sc[8], mn[8];
      unpack_scales_mins(in + 4, sc, mn);
      for (int j = 0; j < 8; ++j) {
        out[kQ4_Kx16Scales + 64 + 16 * j + i] = sc[j];
        out[kQ4_Kx16Scales + 192 + 16 * j + i] = mn[j];
      }
    }
  }
}

}  // namespace

bool interleave_supported(gguf::TensorType type) {
  return type == gguf::TensorType::Q4_0 || type == gguf::TensorType::Q4_K;
}

int64_t interleaved_bytes(const WeightView& w) {
  TM_CHECK(interleave_supported(w.type) && w.cols % gguf::tensor_type_info(w.type).block_size == 0);
  const int64_t groups = (w.rows + kInterleaveRows - 1) / kInterleaveRows;
  if (w.type == gguf::TensorType::Q4_K) return groups * (w.cols / 256) * kQ4_Kx16BlockBytes;
  return groups * (w.cols / 32) * kQ4_0x16BlockBytes;
}

void interleave_weights(const WeightView& w, uint8_t* dst) {
  TM_CHECK(interleave_supported(w.type) && w.cols % gguf::tensor_type_info(w.type).block_size == 0);
  std::memset(dst, 0, static_cast<size_t>(interleaved_bytes(w)));
  if (w.type == gguf::TensorType::Q4_K) return interleave_q4_k(w, dst);
  constexpr int64_t kBlockBytes = 18;  // Q4_0: fp16 d, 16 bytes of nibbles
  const int64_t blocks = w.cols / 32;
  const int64_t row_bytes = blocks * kBlockBytes;
  const auto* src = static_cast<const uint8_t*>(w.data);
  for (int64_t r = 0; r < w.rows; ++r) {
    const int64_t g = r / kInterleaveRows, i = r % kInterleaveRows;
    for (int64_t b = 0; b < blocks; ++b) {
      const uint8_t* in = src + r * row_bytes + b * kBlockBytes;
      uint8_t* out = dst + (g * blocks + b) * kQ4_0x16BlockBytes;
      for (int64_t p = 0; p < 8; ++p) std::memcpy(out + 32 * p + 2 * i, in + 2 + 2 * p, 2);
      std::memcpy(out + 256 + 2 * i, in, 2);
    }
  }
}

}  // namespace tokenmill::kernels
