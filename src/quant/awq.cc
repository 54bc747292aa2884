#include "quant/awq.h"

#include <algorithm>
#include <cmath>

#include "kernels/matmul.h"
#include "kernels/quant.h"
#include "quant/importance_quant.h"
#include "quant/output_error.h"

namespace tokenmill::quant {
namespace {

std::vector<float> factors_for(const std::vector<float>& mean_abs, float alpha) {
  std::vector<float> s(mean_abs.size(), 1.0f);
  float lo = 0.0f, hi = 0.0f;
  for (size_t j = 0; j < s.size(); ++j) {
    if (!(mean_abs[j] > 0.0f)) continue;  // an input that is always 0: leave its column alone
    s[j] = std::max(std::pow(mean_abs[j], alpha), 1e-4f);
    lo = lo == 0.0f ? s[j] : std::min(lo, s[j]);
    hi = std::max(hi, s[j]);
  }
  const float norm = lo > 0.0f ? std::sqrt(lo * hi) : 1.0f;
  for (size_t j = 0; j < s.size(); ++j) {
    if (mean_abs[j] > 0.0f) s[j] /= norm;
  }
  return s;
}

// Rows searched per matrix: as many as the budget allows (at least 8).
std::vector<int64_t> sample_rows(int64_t rows, int64_t cols, int64_t budget) {
  return evenly_spaced_rows(rows, std::clamp<int64_t>(budget / std::max<int64_t>(cols * cols, 1), 8, rows));
}

}  // namespace

AwqResult search_awq_scales(const std::vector<AwqMatrix>& group, int64_t cols, const std::vector<double>& h,
                            const std::vector<float>& mean_abs, const std::vector<float>& mean_sq, const AwqOptions& o,
                            ThreadPool& pool) {
  struct Job {
    const AwqMatrix* m;
    int64_t row;
  };
  std::vector<Job> jobs;
  for (const AwqMatrix& m : group) {
    for (int64_t r : sample_rows(m.rows, cols, o.eval_budget)) jobs.push_back({&m, r});
  }
  const int64_t num_jobs = static_cast<int64_t>(jobs.size());
  const std::vector<float> hf(h.begin(), h.end());
  std::vector<float> diffs(static_cast<size_t>(num_jobs * cols));
  AwqResult best;
  best.error = -1.0;
  for (int k = 0; k < o.grid; ++k) {
    const float alpha = static_cast<float>(k) / static_cast<float>(o.grid);
    const std::vector<float> s = factors_for(mean_abs, alpha);
    std::vector<float> importance;
    if (o.weighted) {
      importance.resize(static_cast<size_t>(cols));
      for (int64_t j = 0; j < cols; ++j) importance[j] = mean_sq[j] / (s[j] * s[j]);
    }
    // d for every row searched, then d^T H d for all of them at once.
    pool.parallel_for(static_cast<int64_t>(jobs.size()), [&](int, int64_t begin, int64_t end) {
      std::vector<float> x(static_cast<size_t>(cols)), xr(static_cast<size_t>(cols));
      std::vector<uint8_t> q;
      for (int64_t i = begin; i < end; ++i) {
        const Job& job = jobs[static_cast<size_t>(i)];
        const float* w = job.m->w + job.row * cols;
        for (int64_t j = 0; j < cols; ++j) x[j] = w[j] * s[j];
        q.resize(static_cast<size_t>(gguf::row_bytes(job.m->type, cols)));
        quantize_row_weighted(job.m->type, x.data(), q.data(), cols, importance.empty() ? nullptr : importance.data());
        kernels::dequantize_row_ref(job.m->type, q.data(), xr.data(), cols);
        float* d = diffs.data() + i * cols;
        for (int64_t j = 0; j < cols; ++j) d[j] = w[j] - xr[j] / s[j];
      }
    });
    const double error = output_error(hf, cols, diffs.data(), num_jobs, pool);
    if (k == 0) best.plain_error = error;
    if (best.error < 0.0 || error < best.error) best.error = error, best.alpha = alpha, best.scales = s;
  }
  return best;
}

std::vector<float> search_awq_clip(gguf::TensorType type, const float* w, int64_t rows, int64_t cols,
                                   const std::vector<double>& h, const float* importance, int steps, ThreadPool& pool) {
  const int64_t qb = gguf::tensor_type_info(type).block_size, blocks = cols / qb;
  std::vector<float> ratios(static_cast<size_t>(rows * blocks), 1.0f);
  pool.parallel_for(rows * blocks, [&](int, int64_t begin, int64_t end) {
    std::vector<float> clipped(static_cast<size_t>(qb)), back(static_cast<size_t>(qb));
    std::vector<double> d(static_cast<size_t>(qb));
    std::vector<uint8_t> q(static_cast<size_t>(gguf::row_bytes(type, qb)));
    for (int64_t i = begin; i < end; ++i) {
      const int64_t c0 = (i % blocks) * qb;
      const float* x = w + (i / blocks) * cols + c0;
      double best = -1.0;
      for (int k = 0; k < steps; ++k) {
        const float ratio = 1.0f - static_cast<float>(k) / 20.0f;
        std::copy(x, x + qb, clipped.begin());
        clip_block(clipped.data(), qb, ratio);
        quantize_row_weighted(type, clipped.data(), q.data(), qb, importance == nullptr ? nullptr : importance + c0);
        kernels::dequantize_row_ref(type, q.data(), back.data(), qb);
        for (int64_t j = 0; j < qb; ++j) d[j] = double(x[j]) - back[j];
        double e = 0.0;
        for (int64_t a = 0; a < qb; ++a) {
          const double* ha = h.data() + (c0 + a) * cols + c0;
          double s = 0.0;
          for (int64_t b = 0; b < qb; ++b) s += ha[b] * d[b];
          e += s * d[a];
        }
        if (best < 0.0 || e < best) best = e, ratios[static_cast<size_t>(i)] = ratio;
      }
    }
  });
  return ratios;
}

void clip_block(float* x, int64_t n, float ratio) {
  if (ratio >= 1.0f) return;
  float m = 0.0f;
  for (int64_t j = 0; j < n; ++j) m = std::max(m, std::fabs(x[j]));
  m *= ratio;
  for (int64_t j = 0; j < n; ++j) x[j] = std::clamp(x[j], -m, m);
}

void apply_awq_clip(gguf::TensorType type, float* w, int64_t first_row, int64_t rows, int64_t cols,
                    const std::vector<float>& ratios) {
  const int64_t qb = gguf::tensor_type_info(type).block_size, blocks = cols / qb;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t b = 0; b < blocks; ++b)
      clip_block(w + r * cols + b * qb, qb, ratios[static_cast<size_t>((first_row + r) * blocks + b)]);
  }
}

}  // namespace tokenmill::quant
