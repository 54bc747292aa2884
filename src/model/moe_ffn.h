// The feed-forward block of a mixture-of-experts layer: a router picks each
// token's experts, the experts (SwiGLU FFNs) run on the tokens routed to
// them, and their outputs are summed with the router's weights (plus, in
// qwen2moe, a shared expert every token runs through).
//
// Cost: grouped by expert, every expert's matrices are read once per step,
// whatever the number of its tokens, and all experts' products run in one
// parallel region per projection (kernels::matmul_grouped).
//
// Thread-safety: one caller at a time per MoeScratch; the pool does the
// parallel work.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "model/config.h"
#include "model/weights.h"
#include "util/thread_pool.h"

namespace tokenmill::model {

// How the experts of a step are computed. kGrouped: the step's (token,
// expert) pairs sorted by expert, one product per expert over its tokens.
// kPerToken: each token's experts one after the other, one product per
// token and expert (every expert read once per token: the order a naive
// implementation runs; kept as the reference grouping is tested against).
// Both give the same bits where the kernels' per-token results do not
// depend on how many tokens a call holds (the integer paths of quantized
// weights); float weights differ by float32 rounding.
enum class ExpertCompute { kGrouped, kPerToken };

// Each token's chosen experts, most probable first, and their weights:
// experts/weights [num_tokens, k].
struct ExpertRouting {
  int64_t num_tokens = 0;
  int64_t k = 0;
  std::vector<int32_t> experts;
  std::vector<float> weights;
};

// Softmax over each row of logits [num_tokens, n_expert] in float32, then
// the k largest probabilities (ties: the lower expert first), divided by
// their sum when `normalise` (the sum clamped below at 2^-14, as llama.cpp).
// Precondition: 1 <= k <= n_expert.
void route_tokens(const float* logits, int64_t num_tokens, int64_t n_expert, int64_t k, bool normalise,
                  ExpertRouting& out);

// The grouped layout of rows whose experts are `experts`: expert e's rows,
// in their given order, occupy [offsets[e], offsets[e + 1]) (offsets:
// [n_expert + 1]); row_of[i] is row i's place there.
void group_rows_by_expert(std::span<const int32_t> experts, int64_t n_expert, std::vector<int64_t>& offsets,
                          std::vector<int64_t>& row_of);

// Buffers of moe_ffn, reused across calls (grown, never shrunk).
struct MoeScratch {
  std::vector<float> logits;  // [T, n_expert]
  ExpertRouting routing;
  std::vector<int64_t> offsets;               // [n_expert + 1]: expert e's rows are [offsets[e], offsets[e + 1])
  std::vector<int64_t> slot_row;              // [T * k]: grouped row of token t's j-th expert
  std::vector<float> x;                       // [T * k, n_embd]  inputs grouped by expert
  std::vector<float> gate;                    // [T * k, n_ff_exp]
  std::vector<float> up;                      // [T * k, n_ff_exp]
  std::vector<float> y;                       // [T * k, n_embd]  expert outputs, grouped
  std::vector<float> shared;                  // [T, n_embd]      shared expert output
  std::vector<float> shared_gate, shared_up;  // [T, n_ff_shexp]
};

// The expert half of moe_ffn on grouped rows: s.x [offsets.back(),
// n_embd] holds expert e's input rows at [offsets[e], offsets[e + 1]) (e
// over all n_expert; only experts with rows are read); their outputs go
// to the same rows of s.y [.., n_embd]. Grows s.gate, s.up and s.y.
void run_experts(const LayerWeights& w, const ModelConfig& c, std::span<const int64_t> offsets, ExpertCompute mode,
                 MoeScratch& s, ThreadPool& pool);

// out[t] for each of `num_tokens` tokens: sum over its k experts (routing
// order) of weight * the expert's output row slot_row[t * k + j] of y
// [.., n_embd]; then + shared [t] when `shared` is not null.
void combine_experts(const ExpertRouting& routing, std::span<const int64_t> slot_row, const float* y,
                     const float* shared, int64_t n_embd, float* out, ThreadPool& pool);

// The shared expert (qwen2moe) of in [T, n_embd] into s.shared [T, n_embd],
// each row scaled by sigmoid(shexp_gate . in[t]).
void run_shared_expert(const LayerWeights& w, const ModelConfig& c, const float* in, int64_t num_tokens, MoeScratch& s,
                       ThreadPool& pool);

// out [T, n_embd] = the MoE FFN of in [T, n_embd] with layer weights w
// (config c, whose n_ff_exp / n_ff_shexp are this rank's share under tensor
// parallelism: the output is then this rank's partial sum). For each token,
// sum_j weight_j * down_j(silu(gate_j x) * up_j x) over its experts in
// routing order, then + sigmoid(shexp_gate . x) * shared(x). `out` may be
// `in` (everything reading in is done before out is written).
// expert_tokens (empty, or [n_expert]): each expert's token count is added.
void moe_ffn(const LayerWeights& w, const ModelConfig& c, const float* in, int64_t num_tokens, float* out,
             ExpertCompute mode, MoeScratch& s, ThreadPool& pool, std::span<int64_t> expert_tokens = {});

}  // namespace tokenmill::model
