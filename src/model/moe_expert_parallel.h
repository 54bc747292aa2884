// The mixture-of-experts FFN with the experts spread over ranks (expert
// parallelism, model/parallel.h). Each rank holds the experts of
// expert_part() whole and routes a contiguous share of the step's tokens
// (even_part of them): it sends every (token, expert) row to the expert's
// rank and gets the expert's output back (two all-to-alls), combines its
// tokens' outputs as moe_ffn does, and the combined rows are gathered on
// every rank (an all-gather). Bytes and time go to the runtime's
// CommStats, so the engine counts them in the step's communication share.
//
// Every rank routes every token (the router is small): the routing of one
// process, whatever the split. With the attention replicated (tp_size 1),
// each expert sees the rows one process would give it, in the same order,
// so the result is bit for bit one process's on the integer kernel paths.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "model/moe_ffn.h"
#include "model/parallel.h"

namespace tokenmill::model {

// Buffers of the exchanges, reused across calls.
struct ExpertParallelScratch {
  std::vector<int64_t> send_pairs;    // own pair indices t * k + j, ordered by destination rank
  std::vector<float> send_rows;       // [sent, n_embd]
  std::vector<int32_t> send_ids;      // [sent] expert of each row
  std::vector<float> recv_rows;       // [received, n_embd]
  std::vector<int32_t> recv_ids;      // [received]
  std::vector<float> back_rows;       // [received, n_embd] expert outputs, in received order
  std::vector<float> returned;        // [sent, n_embd] outputs of the rows sent
  std::vector<int64_t> own_slot_row;  // [own tokens * k] row of `returned` for each own pair
  std::vector<float> own_out;         // [own tokens, n_embd]
  ExpertRouting own_routing;
};

// out [T, n_embd] = the layer's MoE FFN of in [T, n_embd], the experts on
// their ranks (every rank of the stage calls this with the same tokens).
// `out` may be `in`. expert_tokens (empty, or [n_expert]): every expert's
// token count of the step is added (all experts, from the routing).
void moe_ffn_expert_parallel(const LayerWeights& w, const ModelConfig& c, const ModelShard& shard, ParallelComm& comm,
                             const float* in, int64_t num_tokens, float* out, ExpertCompute mode, MoeScratch& s,
                             ExpertParallelScratch& ep, ThreadPool& pool, std::span<int64_t> expert_tokens = {});

}  // namespace tokenmill::model
