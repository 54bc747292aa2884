// Attention over a paged KV cache (PagedAttention): the keys and values of a
// sequence live in fixed-size blocks of a shared pool, found through the
// sequence's block table, stored as F32, F16, or quantized (Q8_0, FP8 E4M3,
// Q4_0 with an fp16 scale per group of 32 elements; layout in kv/kv_dtype.h). The maths is that of
// kernels::attention (attention.h): causal, grouped-query, optional sliding
// window and soft-capping, online softmax.
//
// Grouped-query attention: the n_head / n_kv_head query heads that share a KV
// head are processed together, so each K and V row (and its F16 -> F32
// conversion) is loaded once per group rather than once per head.
#pragma once

#include <cstdint>
#include <span>

#include "kernels/attention.h"
#include "kv/kv_dtype.h"
#include "util/thread_pool.h"

namespace tokenmill::kernels {

// One layer of a paged KV pool (see kv/paged_kv_storage.h). Position p of a
// sequence with block table `table` is row (table[p / block_size] * block_size
// + p % block_size) of k and v.
struct PagedKv {
  uint8_t* k = nullptr;  // [num_blocks, block_size] rows of kv_row_bytes(dtype, n_kv_dim)
  uint8_t* v = nullptr;  // [num_blocks, block_size] rows of kv_row_bytes(dtype, n_kv_dim)
  kv::KvDtype dtype = kv::KvDtype::F32;
  int64_t block_size = 0;
  int64_t n_kv_dim = 0;    // n_kv_head * head_dim
  int64_t num_blocks = 0;  // block ids in a table must be below this
};

// q:   [num_tokens, n_head, head_dim]  queries of one sequence, at positions q_pos[t]
// out: [num_tokens, n_head, head_dim]
// block_table: the sequence's logical blocks [first_block, ...); must cover
// positions [first_block * block_size, n_ctx). first_block > 0 is a
// sliding-window table that released its older blocks: every query's window
// must start at or after first_block * block_size.
// Query t attends the keys at positions j <= q_pos[t] inside the window;
// blocks wholly outside every query's window are never touched.
// Preconditions (CHECK; the caller validates outside input): q_pos[t] in
// [0, n_ctx), block ids in [0, kv.num_blocks), kv.n_kv_dim ==
// shape.n_kv_head * shape.head_dim. Work is split over (token, KV head)
// pairs; results do not depend on the thread count.
// key_mass (may be null; [n_ctx], indexed by position): each key's
// attention mass is added to it, the softmax weights every query head of
// every query gives it (the heavy-hitter KV policy's score, kv/kv_policy.h).
// out does not change with it.
void paged_attention(const AttentionShape& shape, const float* q, const int64_t* q_pos, int64_t num_tokens,
                     const PagedKv& kv, std::span<const int32_t> block_table, int64_t n_ctx, float* out,
                     ThreadPool& pool, int64_t first_block = 0, float* key_mass = nullptr);

// Stores K and V rows of positions [start_pos, start_pos + num_tokens) of a
// sequence, converted to kv.dtype (F16: round to nearest even; Q8_0 and FP8:
// per group of 32 an fp16 scale max|x| / 127 (/ 448), codes rounded to
// nearest, FP8 ties to even; Q4_0: the scale m / -8 of the element m of
// largest magnitude, codes round(x / d) + 8 clamped to [0, 15]).
// k, v: [num_tokens, n_kv_dim]. Precondition (CHECK): block_table holds
// logical blocks [first_block, ...) covering positions
// [start_pos, start_pos + num_tokens) with ids in [0, kv.num_blocks).
void paged_kv_write(const PagedKv& kv, std::span<const int32_t> block_table, int64_t start_pos, int64_t num_tokens,
                    const float* k, const float* v, int64_t first_block = 0);

// Rotates the keys of every position of `block` (all block_size rows, of
// every KV head of head_dim) by the RoPE angles cos/sin (rope_angles of the
// shift, for rope_dims of each head; neox: the pairs' layout): the key
// shift of a KV policy that re-rotates (kv/kv_policy.h). Rows are read,
// rotated in float and stored back in kv.dtype (requantized for the
// quantized types). Precondition (CHECK): block in [0, kv.num_blocks).
void paged_key_rotate(const PagedKv& kv, int32_t block, int64_t head_dim, int64_t rope_dims, const double* cos,
                      const double* sin, bool neox);

}  // namespace tokenmill::kernels
