// matmul driver: validates shapes once, picks the decode (fused) or panel
// path, and splits rows over the thread pool. The per-ISA arithmetic is in
// the KernelTable (matmul_ref.cc, matmul_avx2.cc, matmul_quant_avx2.cc).
//
// Panel path (prefill, or types without a fused kernel): each thread takes
// whole panels of rows, dequantizes a panel once into a thread-local,
// 64-byte aligned FP32 scratch (about 128 KiB, so it stays in L2), then
// multiplies it with every token's x in blocks of tokens sized for L2. The
// dequantization cost is thus paid once per row per call, however many
// tokens there are.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <cmath>
#include <string>
#include <vector>

#include "kernels/dispatch.h"
#include "kernels/matmul.h"
#include "util/check.h"

namespace tokenmill::kernels {
namespace {

constexpr int64_t kRowQuad = 4;                  // rows per register tile
constexpr int64_t kPanelBytes = 128 * 1024;      // dequantized panel budget
constexpr int64_t kTokenBlockBytes = 256 * 1024; // x rows reused across a panel
constexpr int64_t kFusedRowsPerUnit = 16;        // rows per work unit in decode

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t round_up(int64_t a, int64_t b) { return ceil_div(a, b) * b; }

// Per-thread FP32 scratch, 64-byte aligned, grown on demand, freed at thread
// exit. Pool threads live as long as the pool, so this is allocated once.
float* thread_scratch(int64_t num_floats) {
  struct Buffer {
    float* data = nullptr;
    int64_t capacity = 0;
    ~Buffer() { std::free(data); }
  };
  thread_local Buffer buffer;
  if (buffer.capacity < num_floats) {
    std::free(buffer.data);
    const int64_t bytes = round_up(num_floats * static_cast<int64_t>(sizeof(float)), 64);
    buffer.data = static_cast<float*>(std::aligned_alloc(64, static_cast<size_t>(bytes)));
    TM_CHECK_MSG(buffer.data != nullptr, "out of memory for matmul scratch");
    buffer.capacity = bytes / static_cast<int64_t>(sizeof(float));
  }
  return buffer.data;
}

void run_fused(const KernelTable& kt, const WeightView& w, const float* x, int64_t num_tokens,
               float* y, ThreadPool& pool) {
  const int64_t units = ceil_div(w.rows, kFusedRowsPerUnit);
  pool.parallel_for(units, [&](int, int64_t begin, int64_t end) {
    kt.fused_rows(w, begin * kFusedRowsPerUnit, std::min(end * kFusedRowsPerUnit, w.rows), x,
                  num_tokens, y);
  });
}

// Rows per panel: what fits the scratch budget, but small enough that every
// thread gets about four panels (the pool splits panels evenly, so threads
// finish within one panel of each other).
int64_t panel_rows_for(int64_t rows, int64_t stride, int num_threads) {
  const int64_t fit = kPanelBytes / (stride * static_cast<int64_t>(sizeof(float))) / kRowQuad * kRowQuad;
  const int64_t balanced = round_up(ceil_div(rows, 4 * static_cast<int64_t>(num_threads)), kRowQuad);
  return std::max(kRowQuad, std::min(fit, balanced));
}

void run_panels(const KernelTable& kt, const WeightView& w, const float* x, int64_t num_tokens,
                float* y, ThreadPool& pool) {
  const int64_t rows = w.rows;
  const int64_t cols = w.cols;
  const bool direct = w.type == gguf::TensorType::F32;  // multiply the mapped rows in place
  const int64_t stride = round_up(cols, 16);               // keeps each scratch row 64-byte aligned
  const int64_t panel_rows = panel_rows_for(rows, stride, pool.num_threads());
  const int64_t token_block =
      std::max<int64_t>(1, kTokenBlockBytes / (cols * static_cast<int64_t>(sizeof(float))));
  const int64_t bytes_per_row = gguf::row_bytes(w.type, cols);
  const auto* bytes = static_cast<const uint8_t*>(w.data);
  pool.parallel_for(ceil_div(rows, panel_rows), [&](int, int64_t first, int64_t last) {
    float* scratch = direct ? nullptr : thread_scratch(panel_rows * stride);
    for (int64_t p = first; p < last; ++p) {
      const int64_t r0 = p * panel_rows;
      const int64_t num_rows = std::min(panel_rows, rows - r0);
      const float* panel = scratch;
      int64_t panel_stride = stride;
      if (direct) {
        panel = static_cast<const float*>(w.data) + r0 * cols;
        panel_stride = cols;
      } else {
        for (int64_t i = 0; i < num_rows; ++i) {
          kt.dequantize_row(w.type, bytes + (r0 + i) * bytes_per_row, scratch + i * stride, cols);
        }
      }
      for (int64_t t0 = 0; t0 < num_tokens; t0 += token_block) {
        kt.gemm_f32(panel, panel_stride, num_rows, x + t0 * cols, cols,
                    std::min(token_block, num_tokens - t0), cols, y + t0 * rows + r0, rows);
      }
    }
  });
}

}  // namespace

void matmul_with(const KernelTable& kt, const WeightView& w, const float* x, int64_t num_tokens,
                 float* y, ThreadPool& pool) {
  TM_CHECK(w.rows >= 0 && w.cols >= 0 && num_tokens >= 0);
  TM_CHECK_MSG(w.cols % gguf::tensor_type_info(w.type).block_size == 0,
               "matmul: cols must be a multiple of the weight type's block size");
  if (num_tokens == 0 || w.rows == 0) return;
  if (w.cols == 0) {
    std::memset(y, 0, static_cast<size_t>(num_tokens * w.rows) * sizeof(float));
    return;
  }
  TM_CHECK(w.data != nullptr && x != nullptr && y != nullptr);
  static const char* simq = std::getenv("TM_SIMQ8");
  std::vector<float> xq;
  static const char* skip = std::getenv("TM_SIMQ8_SKIP");
  if (simq && !(skip && std::strstr(skip, ("," + std::to_string(w.rows) + "x" + std::to_string(w.cols) + ",").c_str())) && w.type != gguf::TensorType::F32 && w.type != gguf::TensorType::F16) {
    const int64_t bs = std::atoi(simq);
    xq.assign(x, x + num_tokens * w.cols);
    for (int64_t b = 0; b < num_tokens * w.cols; b += bs) {
      float amax = 0; for (int64_t j = 0; j < bs; ++j) amax = std::max(amax, std::fabs(xq[b + j]));
      if (amax == 0) continue;
      const float id = 127.0f / amax, d = amax / 127.0f;
      for (int64_t j = 0; j < bs; ++j) xq[b + j] = d * std::nearbyint(xq[b + j] * id);
    }
    x = xq.data();
  }
  if (num_tokens <= kMaxFusedTokens && kt.fused_supports != nullptr && kt.fused_supports(w.type)) {
    run_fused(kt, w, x, num_tokens, y, pool);
  } else {
    run_panels(kt, w, x, num_tokens, y, pool);
  }
}

void matmul(const WeightView& w, const float* x, int64_t num_tokens, float* y, ThreadPool& pool) {
  matmul_with(active_kernels(), w, x, num_tokens, y, pool);
}

}  // namespace tokenmill::kernels
