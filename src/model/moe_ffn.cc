#include "model/moe_ffn.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "util/check.h"

namespace tokenmill::model {
namespace {

// The smallest weight sum a renormalisation divides by (llama.cpp clamps
// to the smallest normal fp16, 2^-14).
constexpr float kMinWeightSum = 6.103515625e-5f;

void grow(std::vector<float>& v, int64_t n) {
  if (static_cast<int64_t>(v.size()) < n) v.resize(static_cast<size_t>(n));
}

// Every expert over its rows: gate and up in one grouped product, SwiGLU,
// down in another.
void run_grouped(const LayerWeights& w, const ModelConfig& c, std::span<const int64_t> offsets, MoeScratch& s,
                 ThreadPool& pool) {
  const int64_t rows = offsets.back();
  std::vector<kernels::GroupedProduct> gate_up, down;
  for (int64_t e = 0; e < c.n_expert; ++e) {
    const int64_t first = offsets[static_cast<size_t>(e)];
    const int64_t n = offsets[static_cast<size_t>(e) + 1] - first;
    if (n == 0) continue;
    const auto ex = static_cast<size_t>(e);
    gate_up.push_back({&w.gate_exps[ex], first, n, s.gate.data() + first * c.n_ff_exp});
    gate_up.push_back({&w.up_exps[ex], first, n, s.up.data() + first * c.n_ff_exp});
    down.push_back({&w.down_exps[ex], first, n, s.y.data() + first * c.n_embd});
  }
  kernels::matmul_grouped(gate_up, s.x.data(), rows, pool);
  kernels::swiglu(s.gate.data(), s.up.data(), rows * c.n_ff_exp);
  kernels::matmul_grouped(down, s.gate.data(), rows, pool);
}

// The reference order: row by row (token by token), one product each.
void run_per_token(const LayerWeights& w, const ModelConfig& c, std::span<const int64_t> offsets, MoeScratch& s,
                   ThreadPool& pool) {
  for (int64_t e = 0; e < c.n_expert; ++e) {
    const auto ex = static_cast<size_t>(e);
    for (int64_t row = offsets[ex]; row < offsets[ex + 1]; ++row) {
      const kernels::WeightView ws[] = {w.gate_exps[ex], w.up_exps[ex]};
      float* const ys[] = {s.gate.data() + row * c.n_ff_exp, s.up.data() + row * c.n_ff_exp};
      kernels::matmul_many(ws, s.x.data() + row * c.n_embd, 1, ys, pool);
      kernels::swiglu(ys[0], ys[1], c.n_ff_exp);
      kernels::matmul(w.down_exps[ex], ys[0], 1, s.y.data() + row * c.n_embd, pool);
    }
  }
}

}  // namespace

void group_rows_by_expert(std::span<const int32_t> experts, int64_t n_expert, std::vector<int64_t>& offsets,
                          std::vector<int64_t>& row_of) {
  offsets.assign(static_cast<size_t>(n_expert) + 1, 0);
  for (int32_t e : experts) ++offsets[static_cast<size_t>(e) + 1];
  std::partial_sum(offsets.begin(), offsets.end(), offsets.begin());
  std::vector<int64_t> next(offsets.begin(), offsets.end() - 1);
  row_of.resize(experts.size());
  for (size_t i = 0; i < experts.size(); ++i) row_of[i] = next[static_cast<size_t>(experts[i])]++;
}

void route_tokens(const float* logits, int64_t num_tokens, int64_t n_expert, int64_t k, bool normalise,
                  ExpertRouting& out) {
  TM_CHECK(k >= 1 && k <= n_expert);
  out.num_tokens = num_tokens;
  out.k = k;
  out.experts.resize(static_cast<size_t>(num_tokens * k));
  out.weights.resize(static_cast<size_t>(num_tokens * k));
  std::vector<float> probs(static_cast<size_t>(n_expert));
  std::vector<int32_t> order(static_cast<size_t>(n_expert));
  for (int64_t t = 0; t < num_tokens; ++t) {
    const float* row = logits + t * n_expert;
    const float max = *std::max_element(row, row + n_expert);
    float sum = 0.0f;
    for (int64_t e = 0; e < n_expert; ++e) sum += probs[static_cast<size_t>(e)] = std::exp(row[e] - max);
    for (float& p : probs) p /= sum;
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int32_t a, int32_t b) {
      const float pa = probs[static_cast<size_t>(a)], pb = probs[static_cast<size_t>(b)];
      return pa > pb || (pa == pb && a < b);
    });
    float picked = 0.0f;
    for (int64_t j = 0; j < k; ++j) picked += probs[static_cast<size_t>(order[static_cast<size_t>(j)])];
    const float divisor = normalise ? std::max(picked, kMinWeightSum) : 1.0f;
    for (int64_t j = 0; j < k; ++j) {
      const auto at = static_cast<size_t>(t * k + j);
      out.experts[at] = order[static_cast<size_t>(j)];
      out.weights[at] = probs[static_cast<size_t>(order[static_cast<size_t>(j)])] / divisor;
    }
  }
}

void run_experts(const LayerWeights& w, const ModelConfig& c, std::span<const int64_t> offsets, ExpertCompute mode,
                 MoeScratch& s, ThreadPool& pool) {
  const int64_t rows = offsets.back();
  grow(s.gate, rows * c.n_ff_exp);
  grow(s.up, rows * c.n_ff_exp);
  grow(s.y, rows * c.n_embd);
  if (mode == ExpertCompute::kGrouped) {
    run_grouped(w, c, offsets, s, pool);
  } else {
    run_per_token(w, c, offsets, s, pool);
  }
}

void run_shared_expert(const LayerWeights& w, const ModelConfig& c, const float* in, int64_t T, MoeScratch& s,
                       ThreadPool& pool) {
  grow(s.shared, T * c.n_embd);
  grow(s.shared_gate, T * c.n_ff_shexp);
  grow(s.shared_up, T * c.n_ff_shexp);
  const kernels::WeightView ws[] = {w.gate_shexp, w.up_shexp};
  float* const ys[] = {s.shared_gate.data(), s.shared_up.data()};
  kernels::matmul_many(ws, in, T, ys, pool);
  kernels::swiglu(s.shared_gate.data(), s.shared_up.data(), T * c.n_ff_shexp);
  kernels::matmul(w.down_shexp, s.shared_gate.data(), T, s.shared.data(), pool);
  pool.parallel_for(T, [&](int, int64_t first, int64_t last) {
    for (int64_t t = first; t < last; ++t) {
      double dot = 0.0;
      for (int64_t i = 0; i < c.n_embd; ++i) dot += static_cast<double>(w.shexp_gate.data[i]) * in[t * c.n_embd + i];
      const float g = static_cast<float>(1.0 / (1.0 + std::exp(-dot)));
      kernels::scale_inplace(s.shared.data() + t * c.n_embd, g, c.n_embd);
    }
  });
}

void combine_experts(const ExpertRouting& routing, std::span<const int64_t> slot_row, const float* y,
                     const float* shared, int64_t n_embd, float* out, ThreadPool& pool) {
  const int64_t k = routing.k;
  // In routing order whatever the grouping, so the sum is the same.
  pool.parallel_for(routing.num_tokens, [&](int, int64_t first, int64_t last) {
    for (int64_t t = first; t < last; ++t) {
      float* o = out + t * n_embd;
      for (int64_t j = 0; j < k; ++j) {
        const auto at = static_cast<size_t>(t * k + j);
        const float weight = routing.weights[at];
        const float* row = y + slot_row[at] * n_embd;
        if (j == 0) {
          for (int64_t i = 0; i < n_embd; ++i) o[i] = weight * row[i];
        } else {
          for (int64_t i = 0; i < n_embd; ++i) o[i] += weight * row[i];
        }
      }
      if (shared != nullptr) {
        const float* sh = shared + t * n_embd;
        for (int64_t i = 0; i < n_embd; ++i) o[i] += sh[i];
      }
    }
  });
}

void moe_ffn(const LayerWeights& w, const ModelConfig& c, const float* in, int64_t num_tokens, float* out,
             ExpertCompute mode, MoeScratch& s, ThreadPool& pool, std::span<int64_t> expert_tokens) {
  TM_CHECK(c.is_moe() && static_cast<int64_t>(w.gate_exps.size()) == c.n_expert);
  const int64_t T = num_tokens, k = c.n_expert_used, pairs = T * k;
  if (T == 0) return;
  // The router in float32 (kernels::matmul of the file's router type).
  grow(s.logits, T * c.n_expert);
  kernels::matmul(w.router, in, T, s.logits.data(), pool);
  route_tokens(s.logits.data(), T, c.n_expert, k, c.expert_weights_norm, s.routing);
  group_rows_by_expert(s.routing.experts, c.n_expert, s.offsets, s.slot_row);
  if (!expert_tokens.empty()) {
    TM_CHECK(static_cast<int64_t>(expert_tokens.size()) == c.n_expert);
    for (int64_t e = 0; e < c.n_expert; ++e)
      expert_tokens[static_cast<size_t>(e)] +=
          s.offsets[static_cast<size_t>(e) + 1] - s.offsets[static_cast<size_t>(e)];
  }
  grow(s.x, pairs * c.n_embd);
  for (int64_t i = 0; i < pairs; ++i)
    std::copy_n(in + (i / k) * c.n_embd, c.n_embd, s.x.data() + s.slot_row[static_cast<size_t>(i)] * c.n_embd);
  run_experts(w, c, s.offsets, mode, s, pool);
  const bool shared = c.n_ff_shexp > 0 && w.shexp_gate.present();
  if (shared) run_shared_expert(w, c, in, T, s, pool);
  combine_experts(s.routing, s.slot_row, s.y.data(), shared ? s.shared.data() : nullptr, c.n_embd, out, pool);
}

}  // namespace tokenmill::model
