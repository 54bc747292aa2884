#include "kernels/w8a8.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/dispatch.h"
#include "kernels/quant_blocks.h"
#include "util/check.h"
#include "util/fp16.h"

namespace tokenmill::kernels {
namespace {

void check_weights(const WeightView& w) {
  TM_CHECK_MSG(w.type == gguf::TensorType::Q8_0, "W8A8 needs Q8_0 weights");
  TM_CHECK(w.cols % kQK8_0 == 0 && w.data != nullptr);
}

}  // namespace

void w8a8_rows_ref(const WeightView& w, int64_t row_begin, int64_t row_end, const int8_t* qx, const float* sx,
                   int64_t num_tokens, float* y) {
  const int64_t nb = w.cols / kQK8_0;
  const auto* blocks = static_cast<const BlockQ8_0*>(w.data);
  for (int64_t r = row_begin; r < row_end; ++r) {
    const BlockQ8_0* row = blocks + r * nb;
    for (int64_t t = 0; t < num_tokens; ++t) {
      const int8_t* xq = qx + t * w.cols;
      float acc = 0.0f;
      for (int64_t b = 0; b < nb; ++b) {
        int32_t dot = 0;
        for (int i = 0; i < kQK8_0; ++i) dot += int32_t{row[b].qs[i]} * int32_t{xq[b * kQK8_0 + i]};
        acc += fp16_to_fp32(row[b].d) * static_cast<float>(dot);
      }
      y[t * w.rows + r] = acc * sx[t];
    }
  }
}

void quantize_activations_q8(const float* x, int64_t num_tokens, int64_t cols, int8_t* q, float* scales) {
  for (int64_t t = 0; t < num_tokens; ++t) {
    const float* xt = x + t * cols;
    float amax = 0.0f;
    for (int64_t c = 0; c < cols; ++c) amax = std::max(amax, std::fabs(xt[c]));
    const float s = amax / 127.0f;
    const float inv = s > 0.0f ? 1.0f / s : 0.0f;
    scales[t] = s;
    for (int64_t c = 0; c < cols; ++c) {
      q[t * cols + c] = static_cast<int8_t>(std::clamp(std::nearbyint(xt[c] * inv), -127.0f, 127.0f));
    }
  }
}

void matmul_w8a8_ref(const WeightView& w, const float* x, int64_t num_tokens, float* y) {
  check_weights(w);
  std::vector<int8_t> q(static_cast<size_t>(num_tokens * w.cols));
  std::vector<float> s(static_cast<size_t>(num_tokens));
  quantize_activations_q8(x, num_tokens, w.cols, q.data(), s.data());
  w8a8_rows_ref(w, 0, w.rows, q.data(), s.data(), num_tokens, y);
}

void matmul_w8a8(const WeightView& w, const float* x, int64_t num_tokens, float* y, ThreadPool& pool) {
  check_weights(w);
  if (num_tokens <= 0) return;
  std::vector<int8_t> q(static_cast<size_t>(num_tokens * w.cols));
  std::vector<float> s(static_cast<size_t>(num_tokens));
  quantize_activations_q8(x, num_tokens, w.cols, q.data(), s.data());
  const auto rows = active_kernels().w8a8_rows;
  constexpr int64_t kTile = 4;  // tokens per pass over a weight row
  pool.parallel_for(w.rows, [&](int, int64_t begin, int64_t end) {
    for (int64_t t0 = 0; t0 < num_tokens; t0 += kTile) {
      const int64_t nt = std::min(kTile, num_tokens - t0);
      const int8_t* qt = q.data() + t0 * w.cols;
      rows(w, begin, end, qt, s.data() + t0, nt, y + t0 * w.rows);
    }
  });
}

}  // namespace tokenmill::kernels
