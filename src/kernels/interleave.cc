#include "kernels/interleave.h"

#include <cstring>

#include "util/check.h"

namespace tokenmill::kernels {

bool interleave_supported(gguf::TensorType type) { return type == gguf::TensorType::Q4_0; }

int64_t interleaved_bytes(const WeightView& w) {
  TM_CHECK(interleave_supported(w.type) && w.cols % 32 == 0);
  const int64_t groups = (w.rows + kInterleaveRows - 1) / kInterleaveRows;
  return groups * (w.cols / 32) * kQ4_0x16BlockBytes;
}

void interleave_weights(const WeightView& w, uint8_t* dst) {
  TM_CHECK(interleave_supported(w.type) && w.cols % 32 == 0);
  constexpr int64_t kBlockBytes = 18;  // Q4_0: fp16 d, 16 bytes of nibbles
  const int64_t blocks = w.cols / 32;
  const int64_t row_bytes = blocks * kBlockBytes;
  const auto* src = static_cast<const uint8_t*>(w.data);
  std::memset(dst, 0, static_cast<size_t>(interleaved_bytes(w)));
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
