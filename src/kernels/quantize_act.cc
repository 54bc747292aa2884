// Activation quantization: storage and the scalar reference.
#include "kernels/quantize_act.h"

#include <algorithm>
#include <cmath>

#include "util/check.h"
#include "util/int_math.h"

namespace tokenmill::kernels {
namespace {}  // namespace

void QuantizedActsBuffer::resize(int64_t num_tokens, int64_t cols) {
  TM_CHECK(num_tokens >= 0 && cols >= 0 && cols % kActBlock == 0);
  // Four arrays, each starting on a 64-byte boundary.
  const int64_t qs_bytes = round_up(num_tokens * cols * 2, 64);
  const int64_t scale_bytes = round_up(num_tokens * (cols / kActBlock) * 4, 64);
  const int64_t s16_bytes = round_up(num_tokens * (cols / 16) * 4, 64);
  const int64_t total = std::max<int64_t>(64, qs_bytes + 2 * scale_bytes + s16_bytes);
  if (total > capacity_bytes_) {
    std::free(storage_);
    storage_ = std::aligned_alloc(64, static_cast<size_t>(total));
    TM_CHECK_MSG(storage_ != nullptr, "out of memory for quantized activations");
    capacity_bytes_ = total;
  }
  auto* base = static_cast<uint8_t*>(storage_);
  cols_ = cols;
  qs_ = reinterpret_cast<int16_t*>(base);
  d_ = reinterpret_cast<float*>(base + qs_bytes);
  s32_ = reinterpret_cast<float*>(base + qs_bytes + scale_bytes);
  s16_ = reinterpret_cast<float*>(base + qs_bytes + 2 * scale_bytes);
}

void quantize_acts_ref(const float* x, int64_t num_tokens, int64_t cols, const QuantizedActsOut& out) {
  TM_CHECK(cols % kActBlock == 0);
  const int64_t nb = num_tokens * cols / kActBlock;
  for (int64_t b = 0; b < nb; ++b) {
    const float* xb = x + b * kActBlock;
    float amax = 0.0f;
    for (int64_t j = 0; j < kActBlock; ++j) amax = std::max(amax, std::fabs(xb[j]));
    // Blocks below kActTiny round to zeros (32767 / max would overflow).
    const float id = amax > kActTiny ? 32767.0f / amax : 0.0f;
    int32_t sum[2] = {0, 0};
    for (int64_t j = 0; j < kActBlock; ++j) {
      // The clamp only matters for non-finite input (NaN becomes -32767);
      // it keeps the cast defined and matches the AVX2 min/max.
      const float r = std::fmin(std::fmax(std::nearbyint(xb[j] * id), -32767.0f), 32767.0f);
      const auto q = static_cast<int16_t>(r);
      out.qs[b * kActBlock + j] = q;
      sum[j / 16] += q;
    }
    const float d = amax / 32767.0f;
    out.d[b] = d;
    out.s32[b] = d * static_cast<float>(sum[0] + sum[1]);
    out.s16[2 * b] = d * static_cast<float>(sum[0]);
    out.s16[2 * b + 1] = d * static_cast<float>(sum[1]);
  }
}

void dequantize_acts(const QuantizedActs& a, int64_t t, float* out) {
  const int16_t* qs = a.qs + t * a.cols;
  const float* d = a.d + t * (a.cols / kActBlock);
  for (int64_t c = 0; c < a.cols; ++c) out[c] = d[c / kActBlock] * static_cast<float>(qs[c]);
}

}  // namespace tokenmill::kernels
