#include "quant/gptq.h"

#include <algorithm>
#include <cmath>

#include "quant/awq.h"
#include "quant/block_grid.h"
#include "quant/importance_quant.h"
#include "util/error.h"

namespace tokenmill::quant {
namespace {

double dot(const double* a, const double* b, int64_t n) {
  double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  int64_t k = 0;
  for (; k + 4 <= n; k += 4)
    s0 += a[k] * b[k], s1 += a[k + 1] * b[k + 1], s2 += a[k + 2] * b[k + 2], s3 += a[k + 3] * b[k + 3];
  for (; k < n; ++k) s0 += a[k] * b[k];
  return (s0 + s1) + (s2 + s3);
}

// Lower Cholesky factor of m [n, n] in place, column by column: each
// column's entries below the diagonal depend only on earlier columns, so
// they are computed in parallel (every dot product reads two rows,
// contiguous). False when a pivot is not positive.
bool cholesky_lower(std::vector<double>& m, int64_t n, ThreadPool& pool) {
  for (int64_t j = 0; j < n; ++j) {
    double* lj = m.data() + j * n;
    const double d = lj[j] - dot(lj, lj, j);
    if (!(d > 0.0)) return false;
    lj[j] = std::sqrt(d);
    const double pivot = lj[j];
    const int64_t below = n - j - 1;
    const auto column = [&](int, int64_t begin, int64_t end) {
      for (int64_t i = j + 1 + begin; i < j + 1 + end; ++i) {
        double* li = m.data() + i * n;
        li[j] = (li[j] - dot(li, lj, j)) / pivot;
      }
    };
    // Small columns are not worth waking the pool for.
    if (below * j < 16384) {
      column(0, 0, below);
    } else {
      pool.parallel_for(below, column);
    }
  }
  // The upper triangle held H; the callers read only the lower one.
  return true;
}

// Column j of L^-1 (lower) by forward substitution: x[i], i >= j.
void inverse_column(const std::vector<double>& l, int64_t n, int64_t j, std::vector<double>& x) {
  std::fill(x.begin(), x.end(), 0.0);
  for (int64_t i = j; i < n; ++i) {
    const double* li = l.data() + i * n;
    const double s = (i == j ? 1.0 : 0.0) - dot(li + j, x.data() + j, i - j);
    x[static_cast<size_t>(i)] = s / li[i];
  }
}

int block_size(gguf::TensorType type) { return static_cast<int>(gguf::tensor_type_info(type).block_size); }

// The GPTQ sweep over one tile of rows, w [rows, cols] in the factor's
// order: column k of every row is rounded by round_column(k, q) (q[r]: the
// value row r's column k becomes), and its error is spread over the
// columns after it along U, at once within the lazy batch and as one
// rank-batch update of the rest when the batch ends.
template <class RoundColumn>
void sweep(float* w, int64_t rows, int64_t cols, const GptqFactor& f, int64_t lazy, RoundColumn&& round_column) {
  std::vector<float> err(static_cast<size_t>(rows * lazy)), q(static_cast<size_t>(rows));
  for (int64_t b0 = 0; b0 < cols; b0 += lazy) {
    const int64_t b1 = std::min(cols, b0 + lazy);
    for (int64_t k = b0; k < b1; ++k) {
      round_column(k, q.data());
      const float d = f.u[static_cast<size_t>(k * cols + k)];
      const float* uk = f.u.data() + k * cols;
      const bool dead = f.dead[static_cast<size_t>(k)] != 0;
      for (int64_t r = 0; r < rows; ++r) {
        float* wr = w + r * cols;
        const float er = dead ? 0.0f : (wr[k] - q[static_cast<size_t>(r)]) / d;
        err[static_cast<size_t>(r * lazy + (k - b0))] = er;
        for (int64_t m = k + 1; m < b1; ++m) wr[m] -= er * uk[m];
      }
    }
    for (int64_t r = 0; r < rows; ++r) {
      float* wr = w + r * cols;
      for (int64_t k = b0; k < b1; ++k) {
        const float er = err[static_cast<size_t>(r * lazy + (k - b0))];
        if (er == 0.0f) continue;
        const float* uk = f.u.data() + k * cols;
        for (int64_t m = b1; m < cols; ++m) wr[m] -= er * uk[m];
      }
    }
  }
}

// Natural order: each row's block is encoded at its first column from the
// compensated weights (its scales) and rewritten at its last (its codes).
void quantize_tile_natural(gguf::TensorType type, float* w, int64_t rows, int64_t cols, const GptqFactor& f,
                           const float* importance, uint8_t* out, int64_t row_bytes, const float* clip) {
  const int qb = block_size(type);
  const int64_t block_bytes = gguf::tensor_type_info(type).bytes_per_block, blocks = cols / qb;
  std::vector<BlockGrid> grids(static_cast<size_t>(rows));
  std::vector<uint8_t> codes(static_cast<size_t>(rows * qb));
  std::vector<float> clipped(static_cast<size_t>(qb));
  // Batches hold whole blocks, so a block's first column sees every update.
  sweep(w, rows, cols, f, std::max<int64_t>(qb, 128 / qb * qb), [&](int64_t j, float* q) {
    const int e = static_cast<int>(j % qb);
    uint8_t* block = out + (j / qb) * block_bytes;
    for (int64_t r = 0; r < rows; ++r) {
      BlockGrid& g = grids[static_cast<size_t>(r)];
      if (e == 0) {
        const float* src = w + r * cols + j;
        if (clip != nullptr) {
          std::copy(src, src + qb, clipped.begin());
          clip_block(clipped.data(), qb, clip[r * blocks + j / qb]);
          src = clipped.data();
        }
        quantize_row_weighted(type, src, block + r * row_bytes, qb, importance == nullptr ? nullptr : importance + j);
        read_block_grid(type, block + r * row_bytes, g);
      }
      const int c = g.nearest_code(e, w[r * cols + j]);
      codes[static_cast<size_t>(r * qb + e)] = static_cast<uint8_t>(c);
      q[r] = g.value(e, c);
      if (e == qb - 1) write_block_codes(type, block + r * row_bytes, codes.data() + r * qb);
    }
  });
}

// Act-order with static groups: every block encoded from the rows as given
// (its scales), then the sweep in the factor's order on a permuted copy,
// each column rounded on its block's grid; the codes are written at the end.
void quantize_tile_ordered(gguf::TensorType type, float* w, int64_t rows, int64_t cols, const GptqFactor& f,
                           const float* importance, uint8_t* out, int64_t row_bytes, const float* clip) {
  const int qb = block_size(type);
  const int64_t block_bytes = gguf::tensor_type_info(type).bytes_per_block, blocks = cols / qb;
  std::vector<BlockGrid> grids(static_cast<size_t>(rows * blocks));
  std::vector<float> wp(static_cast<size_t>(rows * cols));
  std::vector<float> clipped;
  for (int64_t r = 0; r < rows; ++r) {
    const float* src = w + r * cols;
    if (clip != nullptr) {
      clipped.assign(src, src + cols);
      for (int64_t b = 0; b < blocks; ++b) clip_block(clipped.data() + b * qb, qb, clip[r * blocks + b]);
      src = clipped.data();
    }
    quantize_row_weighted(type, src, out + r * row_bytes, cols, importance);
    for (int64_t b = 0; b < blocks; ++b)
      read_block_grid(type, out + r * row_bytes + b * block_bytes, grids[static_cast<size_t>(r * blocks + b)]);
    for (int64_t k = 0; k < cols; ++k) wp[static_cast<size_t>(r * cols + k)] = w[r * cols + f.order[k]];
  }
  std::vector<uint8_t> codes(static_cast<size_t>(rows * cols));
  sweep(wp.data(), rows, cols, f, 128, [&](int64_t k, float* q) {
    const int64_t col = f.order[static_cast<size_t>(k)];
    const int e = static_cast<int>(col % qb);
    for (int64_t r = 0; r < rows; ++r) {
      const BlockGrid& g = grids[static_cast<size_t>(r * blocks + col / qb)];
      const int c = g.nearest_code(e, wp[static_cast<size_t>(r * cols + k)]);
      codes[static_cast<size_t>(r * cols + col)] = static_cast<uint8_t>(c);
      q[r] = g.value(e, c);
    }
  });
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t b = 0; b < blocks; ++b)
      write_block_codes(type, out + r * row_bytes + b * block_bytes, codes.data() + r * cols + b * qb);
    for (int64_t k = 0; k < cols; ++k) w[r * cols + f.order[k]] = wp[static_cast<size_t>(r * cols + k)];
  }
}

// Columns by decreasing H diagonal (ties: by index, so the order is
// deterministic).
std::vector<int32_t> act_order(const std::vector<double>& h, int64_t n) {
  std::vector<int32_t> order(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) order[static_cast<size_t>(i)] = static_cast<int32_t>(i);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return h[static_cast<size_t>(a) * n + a] > h[static_cast<size_t>(b) * n + b];
  });
  return order;
}

}  // namespace

GptqFactor gptq_factor(std::vector<double> h, int64_t n, double damp, ThreadPool& pool, bool ordered) {
  GptqFactor f;
  f.cols = n;
  if (ordered) {
    f.order = act_order(h, n);
    std::vector<double> p(h.size());
    for (int64_t a = 0; a < n; ++a) {
      for (int64_t b = 0; b < n; ++b)
        p[static_cast<size_t>(a * n + b)] = h[static_cast<size_t>(f.order[a]) * n + f.order[b]];
    }
    h = std::move(p);
  }
  f.dead.assign(static_cast<size_t>(n), 0);
  double mean_diag = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    double& d = h[static_cast<size_t>(i * n + i)];
    if (!(d > 0.0)) {
      f.dead[static_cast<size_t>(i)] = 1;
      for (int64_t k = 0; k < n; ++k) h[static_cast<size_t>(i * n + k)] = h[static_cast<size_t>(k * n + i)] = 0.0;
      d = 1.0;
    }
    mean_diag += d;
  }
  mean_diag /= static_cast<double>(std::max<int64_t>(n, 1));
  // Reversed order: the Cholesky factor L of J H J gives H^-1 = U^T U with
  // U = J L^-1 J upper triangular.
  std::vector<double> m(h.size());
  for (double lambda = damp;; lambda *= 10.0) {
    for (int64_t a = 0; a < n; ++a) {
      for (int64_t b = 0; b < n; ++b)
        m[static_cast<size_t>(a * n + b)] = h[static_cast<size_t>((n - 1 - a) * n + (n - 1 - b))];
      m[static_cast<size_t>(a * n + a)] += lambda * mean_diag;
    }
    if (cholesky_lower(m, n, pool)) {
      f.damp_used = lambda;
      break;
    }
    if (lambda >= 1.0)
      fail("GPTQ: the calibration Hessian ({} columns) is not positive definite even with damping 1", n);
  }
  f.u.assign(static_cast<size_t>(n * n), 0.0f);
  // Columns pair j with n - 1 - j so that each task has the same work.
  pool.parallel_for((n + 1) / 2, [&](int, int64_t begin, int64_t end) {
    std::vector<double> x(static_cast<size_t>(n));
    const auto column = [&](int64_t j) {
      inverse_column(m, n, j, x);
      // L^-1[i, j] -> U[n-1-i, n-1-j]
      for (int64_t i = j; i < n; ++i)
        f.u[static_cast<size_t>((n - 1 - i) * n + (n - 1 - j))] = static_cast<float>(x[static_cast<size_t>(i)]);
    };
    for (int64_t p = begin; p < end; ++p) {
      column(p);
      if (n - 1 - p != p) column(n - 1 - p);
    }
  });
  return f;
}

void gptq_quantize(gguf::TensorType type, float* w, int64_t rows, int64_t cols, const GptqFactor& f,
                   const float* importance, uint8_t* out, ThreadPool& pool, const float* clip_ratios) {
  const int64_t row_bytes = gguf::row_bytes(type, cols), blocks = cols / block_size(type);
  for (int64_t k = 0; k < cols; ++k) {
    if (!f.dead[static_cast<size_t>(k)]) continue;
    const int64_t j = f.order.empty() ? k : f.order[static_cast<size_t>(k)];
    for (int64_t r = 0; r < rows; ++r) w[r * cols + j] = 0.0f;
  }
  // Tiles of rows share each row of U while it is in cache.
  constexpr int64_t kTile = 16;
  const int64_t tiles = (rows + kTile - 1) / kTile;
  pool.parallel_for(tiles, [&](int, int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const int64_t r0 = t * kTile, n = std::min(kTile, rows - r0);
      const float* clip = clip_ratios == nullptr ? nullptr : clip_ratios + r0 * blocks;
      if (f.order.empty()) {
        quantize_tile_natural(type, w + r0 * cols, n, cols, f, importance, out + r0 * row_bytes, row_bytes, clip);
      } else {
        quantize_tile_ordered(type, w + r0 * cols, n, cols, f, importance, out + r0 * row_bytes, row_bytes, clip);
      }
    }
  });
}

}  // namespace tokenmill::quant
