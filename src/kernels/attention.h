// Causal multi-head attention for one sequence over its cached keys/values,
// with grouped-query sharing (n_head a multiple of n_kv_head) and optional
// sliding window. FP32 K/V for now; the paged F16/quantized cache plugs in
// later behind the same maths.
#pragma once

#include <algorithm>
#include <cstdint>

#include "util/thread_pool.h"

namespace tokenmill::kernels {

struct AttentionShape {
  int64_t n_head = 0;
  int64_t n_kv_head = 0;
  int64_t head_dim = 0;
  float scale = 1.0f;    // multiplies q·k (usually 1/sqrt(head_dim))
  int64_t window = 0;    // 0: full causal; else key j visible to query at p iff p - j < window
  float softcap = 0.0f;  // 0: none; else scores = softcap * tanh(scores / softcap)

  // The first key position visible to a query at position p (keys up to p).
  int64_t first_visible(int64_t p) const { return window > 0 ? std::max<int64_t>(0, p - window + 1) : 0; }
};

// q:   [num_tokens, n_head, head_dim]   queries, at positions q_pos[t]
// k,v: [n_ctx, n_kv_head, head_dim]     cache; row j holds position j
// out: [num_tokens, n_head, head_dim]
// Query t attends keys j <= q_pos[t] (and inside the window). Precondition:
// q_pos[t] < n_ctx. Uses a numerically stable online softmax.
void attention(const AttentionShape& shape, const float* q, const int64_t* q_pos, int64_t num_tokens, const float* k,
               const float* v, int64_t n_ctx, float* out, ThreadPool& pool);

// Straightforward two-pass reference (scores, softmax, weighted sum) in double.
void attention_ref(const AttentionShape& shape, const float* q, const int64_t* q_pos, int64_t num_tokens,
                   const float* k, const float* v, int64_t n_ctx, float* out);

}  // namespace tokenmill::kernels
