#include "quant/awq.h"

#include <algorithm>
#include <cmath>

#include "kernels/matmul.h"
#include "kernels/quant.h"
#include "quant/importance_quant.h"

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

// Rows searched per matrix: evenly spaced.
std::vector<int64_t> sample_rows(int64_t rows, int64_t cols, int64_t budget) {
  const int64_t n = std::clamp<int64_t>(budget / std::max<int64_t>(cols * cols, 1), 8, rows);
  std::vector<int64_t> out(static_cast<size_t>(n));
  for (int64_t k = 0; k < n; ++k) out[static_cast<size_t>(k)] = k * rows / n;
  return out;
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
  const kernels::WeightView hw{gguf::TensorType::F32, hf.data(), cols, cols, nullptr};
  std::vector<float> diffs(static_cast<size_t>(num_jobs * cols)), products(diffs.size());
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
    // d for every row searched, then d^T H d for all of them as one product
    // D H in the float matmul kernels.
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
    kernels::matmul(hw, diffs.data(), num_jobs, products.data(), pool);
    double error = 0.0;
    for (size_t i = 0; i < diffs.size(); ++i) error += double(diffs[i]) * products[i];
    if (k == 0) best.plain_error = error;
    if (best.error < 0.0 || error < best.error) best.error = error, best.alpha = alpha, best.scales = s;
  }
  return best;
}

}  // namespace tokenmill::quant
