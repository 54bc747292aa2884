// Attention driver (visible key range, GQA head mapping, threading), the
// scalar per-head kernel and the double-precision reference.
#include "kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/dispatch.h"
#include "util/check.h"

namespace tokenmill::kernels {
namespace {

void check_shape(const AttentionShape& s, const int64_t* q_pos, int64_t num_tokens, int64_t n_ctx) {
  TM_CHECK(s.n_head > 0 && s.n_kv_head > 0 && s.head_dim > 0 && s.window >= 0);
  TM_CHECK_MSG(s.n_head % s.n_kv_head == 0, "attention: n_head must be a multiple of n_kv_head");
  for (int64_t t = 0; t < num_tokens; ++t) {
    TM_CHECK_MSG(q_pos[t] >= 0 && q_pos[t] < n_ctx, "attention: query position outside the cache");
  }
}

}  // namespace

// Online softmax in float, one key at a time: the running maximum m, the
// running sum l and the weighted sum in `out` are rescaled when m grows.
void scalar::attend_head(const float* q, const float* k, const float* v, int64_t kv_stride, int64_t j_begin,
                         int64_t j_end, int64_t head_dim, float scale, float softcap, float* out) {
  float m = -std::numeric_limits<float>::infinity();
  float l = 0.0f;
  std::fill(out, out + head_dim, 0.0f);
  for (int64_t j = j_begin; j < j_end; ++j) {
    const float* kj = k + j * kv_stride;
    const float* vj = v + j * kv_stride;
    float s = 0.0f;
    for (int64_t d = 0; d < head_dim; ++d) s += q[d] * kj[d];
    s *= scale;
    if (softcap > 0.0f) s = softcap * std::tanh(s / softcap);
    if (s > m) {
      const float c = std::exp(m - s);  // 0 on the first key (m = -inf)
      for (int64_t d = 0; d < head_dim; ++d) out[d] *= c;
      l *= c;
      m = s;
    }
    const float p = std::exp(s - m);
    l += p;
    for (int64_t d = 0; d < head_dim; ++d) out[d] += p * vj[d];
  }
  const float inv = l > 0.0f ? 1.0f / l : 0.0f;
  for (int64_t d = 0; d < head_dim; ++d) out[d] *= inv;
}

// Work is (token, head) pairs. Later tokens see more keys, so each thread
// takes every num_threads-th pair rather than a contiguous range: the
// threads then finish together.
void attention_with(const KernelTable& kt, const AttentionShape& shape, const float* q, const int64_t* q_pos,
                    int64_t num_tokens, const float* k, const float* v, int64_t n_ctx, float* out, ThreadPool& pool) {
  check_shape(shape, q_pos, num_tokens, n_ctx);
  const int64_t num_pairs = num_tokens * shape.n_head;
  const int64_t group = shape.n_head / shape.n_kv_head;
  const int64_t kv_stride = shape.n_kv_head * shape.head_dim;
  const int64_t num_threads = pool.num_threads();
  pool.parallel_for(std::min(num_threads, num_pairs), [&](int, int64_t first, int64_t last) {
    for (int64_t lane = first; lane < last; ++lane) {
      for (int64_t i = lane; i < num_pairs; i += num_threads) {
        const int64_t t = i / shape.n_head;
        const int64_t h = i % shape.n_head;
        const int64_t kv_offset = (h / group) * shape.head_dim;
        const int64_t offset = (t * shape.n_head + h) * shape.head_dim;
        kt.attend_head(q + offset, k + kv_offset, v + kv_offset, kv_stride, shape.first_visible(q_pos[t]), q_pos[t] + 1,
                       shape.head_dim, shape.scale, shape.softcap, out + offset);
      }
    }
  });
}

void attention(const AttentionShape& shape, const float* q, const int64_t* q_pos, int64_t num_tokens, const float* k,
               const float* v, int64_t n_ctx, float* out, ThreadPool& pool) {
  attention_with(active_kernels(), shape, q, q_pos, num_tokens, k, v, n_ctx, out, pool);
}

void attention_ref(const AttentionShape& shape, const float* q, const int64_t* q_pos, int64_t num_tokens,
                   const float* k, const float* v, int64_t n_ctx, float* out) {
  check_shape(shape, q_pos, num_tokens, n_ctx);
  const int64_t hd = shape.head_dim;
  const int64_t group = shape.n_head / shape.n_kv_head;
  const int64_t kv_stride = shape.n_kv_head * hd;
  std::vector<double> scores;
  for (int64_t t = 0; t < num_tokens; ++t) {
    for (int64_t h = 0; h < shape.n_head; ++h) {
      const float* qh = q + (t * shape.n_head + h) * hd;
      const int64_t kv_offset = (h / group) * hd;
      const int64_t j0 = shape.first_visible(q_pos[t]);
      const int64_t j1 = q_pos[t] + 1;
      scores.assign(static_cast<size_t>(j1 - j0), 0.0);
      double max_s = -std::numeric_limits<double>::infinity();
      for (int64_t j = j0; j < j1; ++j) {
        double s = 0.0;
        for (int64_t d = 0; d < hd; ++d) s += static_cast<double>(qh[d]) * k[j * kv_stride + kv_offset + d];
        s *= shape.scale;
        if (shape.softcap > 0.0f) s = shape.softcap * std::tanh(s / shape.softcap);
        scores[static_cast<size_t>(j - j0)] = s;
        max_s = std::max(max_s, s);
      }
      double sum = 0.0;
      for (double& s : scores) sum += (s = std::exp(s - max_s));
      float* o = out + (t * shape.n_head + h) * hd;
      for (int64_t d = 0; d < hd; ++d) {
        double acc = 0.0;
        for (int64_t j = j0; j < j1; ++j) acc += scores[static_cast<size_t>(j - j0)] * v[j * kv_stride + kv_offset + d];
        o[d] = static_cast<float>(acc / sum);
      }
    }
  }
}

}  // namespace tokenmill::kernels
