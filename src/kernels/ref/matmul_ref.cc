// Scalar matmul pieces: the double-precision reference, the scalar ISA's
// panel product, and embedding-row lookup.
#include <vector>

#include "kernels/dispatch.h"
#include "kernels/matmul.h"
#include "kernels/quant.h"
#include "util/check.h"

namespace tokenmill::kernels {

// Plain float loops: the scalar ISA's speed is not a goal, its clarity is.
void scalar::gemm_f32(const float* w, int64_t w_stride, int64_t num_rows, const float* x, int64_t x_stride,
                      int64_t num_tokens, int64_t cols, float* y, int64_t y_stride) {
  for (int64_t t = 0; t < num_tokens; ++t) {
    for (int64_t r = 0; r < num_rows; ++r) {
      float sum = 0.0f;
      for (int64_t c = 0; c < cols; ++c) sum += w[r * w_stride + c] * x[t * x_stride + c];
      y[t * y_stride + r] = sum;
    }
  }
}

void dequantize_weight_row(const WeightView& w, int64_t row, float* dst) {
  TM_CHECK(row >= 0 && row < w.rows && w.data != nullptr);
  const int64_t bytes = gguf::row_bytes(w.type, w.cols);
  dequantize_row_ref(w.type, static_cast<const uint8_t*>(w.data) + row * bytes, dst, w.cols);
}

void matmul_ref(const WeightView& w, const float* x, int64_t num_tokens, float* y) {
  std::vector<float> row(static_cast<size_t>(w.cols));
  for (int64_t r = 0; r < w.rows; ++r) {
    dequantize_weight_row(w, r, row.data());
    for (int64_t t = 0; t < num_tokens; ++t) {
      double sum = 0.0;
      for (int64_t c = 0; c < w.cols; ++c) {
        sum += static_cast<double>(row[static_cast<size_t>(c)]) * x[t * w.cols + c];
      }
      y[t * w.rows + r] = static_cast<float>(sum);
    }
  }
}

}  // namespace tokenmill::kernels
