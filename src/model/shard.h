// Cutting a model into the shard one rank holds (model/parallel.h): which
// layers, heads, FFN columns and vocabulary rows are its own, and the
// tensor views of them. Row shares (Q, K, V, gate, up, output) are views
// into the mapped file; column shares (the attention output and down
// projections, which tensor parallelism splits along their input) are
// copies, because a quantized row's blocks cannot be viewed column-wise.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "model/config.h"
#include "model/parallel.h"
#include "model/weights.h"

namespace tokenmill::model {

// Part `index` of `parts` contiguous, near-equal parts of [0, n): the first
// n % parts parts hold one more.
struct IndexRange {
  int64_t begin = 0;
  int64_t end = 0;
  int64_t size() const { return end - begin; }
};
IndexRange even_part(int64_t n, int parts, int index);

// The shard with its layer range filled in (even split of n_layer over the
// stages), checked against the model: every stage gets a layer, the
// attention heads and the FFN width divide by tp_size, the KV heads divide
// by it or it by them (then replicated), and the column shares of the
// attention output and down projections start and end on their quant
// blocks. Throws Error naming what does not divide.
ModelShard resolve_shard(const ModelShard& shard, const ModelConfig& config, const ModelWeights& weights);

// The hyperparameters this rank computes with: n_head, n_kv_head (at least
// one) and n_ff divided by tp_size; everything else as in the file.
ModelConfig local_config(const ModelConfig& config, const ModelShard& shard);

// The KV heads rank tp_rank holds: its share, or the one head its query
// heads use when the model has fewer KV heads than ranks (replicated).
IndexRange kv_head_part(const ModelConfig& config, const ModelShard& shard);

// The experts of each layer rank ep_rank holds (all of them without
// expert parallelism).
IndexRange expert_part(const ModelConfig& config, const ModelShard& shard);

// The vocabulary rows of the output projection rank tp_rank computes.
IndexRange vocab_part(const ModelConfig& config, const ModelShard& shard);

// Replaces `weights` by this rank's shard of them (layers outside the
// stage are left unbound; the output projection is cut to vocab_part).
// Column copies are appended to `owned`, which must outlive the views.
void shard_weights(ModelWeights& weights, const ModelConfig& config, const ModelShard& shard,
                   std::vector<std::unique_ptr<uint8_t[]>>& owned);

}  // namespace tokenmill::model
