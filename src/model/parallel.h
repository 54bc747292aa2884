// What a model sharded over several processes needs from the runtime that
// connects them (dist/mpi_runtime.h implements it over MPI). The model
// itself knows no MPI: it is told its shard and calls these collectives at
// the points of the forward pass where the ranks must meet.
//
// Layout: tp_size x pp_size ranks. A pipeline stage holds a contiguous
// range of layers; inside a stage, tp_size ranks each hold a contiguous
// share of the attention heads (and their KV heads), of the FFN columns and
// of the vocabulary. World rank 0 (stage 0, tensor rank 0) runs the engine
// and is the only rank that receives logits.
//
// Expert parallelism (mixture-of-experts models, ep_size > 1, one stage):
// the stage's ep_size ranks each hold a contiguous share of every layer's
// experts, whole; attention is split over the same ranks (tp_size ==
// ep_size) or replicated on each (tp_size 1). Each rank routes a contiguous
// share of the step's tokens and sends each (token, expert) row to the
// expert's rank, which returns the expert's output (all-to-all both ways);
// the combined rows are then gathered on every rank (model/moe_expert_parallel.h).
//
// Thread-safety: one caller at a time (the engine thread on rank 0, the
// worker loop elsewhere).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kv/block_table.h"

namespace tokenmill::model {

struct SequenceChunk;

// This rank's part of the model.
struct ModelShard {
  int tp_rank = 0;
  int tp_size = 1;
  int pp_stage = 0;
  int pp_size = 1;
  int64_t layer_begin = 0;  // the stage's layers [layer_begin, layer_end)
  int64_t layer_end = -1;   // -1: to the last layer (filled in at load)
  // Micro-batches a pipelined step is cut into (pp_size > 1), so that stage
  // s works on micro-batch m while stage s + 1 works on m - 1.
  int64_t microbatches = 1;
  // Expert parallelism: this rank's share of the experts is part ep_rank
  // of ep_size (the stage's ranks; 1: every rank holds every expert).
  int ep_rank = 0;
  int ep_size = 1;

  bool first_stage() const { return pp_stage == 0; }
  bool last_stage() const { return pp_stage == pp_size - 1; }
  bool sharded() const { return tp_size > 1 || pp_size > 1 || ep_size > 1; }
  bool expert_parallel() const { return ep_size > 1; }
};

// Time and traffic of this rank's collectives, cumulative. seconds include
// waiting for the other ranks (which is what the step pays).
struct CommStats {
  double seconds = 0;
  uint64_t bytes = 0;  // payload sent and received by this rank
  uint64_t syncs = 0;  // collective or point-to-point operations
};

class ParallelComm {
 public:
  virtual ~ParallelComm() = default;

  virtual const ModelShard& shard() const = 0;
  // World rank 0: drives the steps and receives the logits.
  virtual bool is_root() const = 0;

  // Root: announces the next forward pass to every other rank (which then
  // calls Model::forward with the same arguments): the block copies made
  // since the last one (per KV pool), the chunks and the skipped layers.
  virtual void publish_step(std::span<const std::vector<kv::BlockCopy>> copies, std::span<const SequenceChunk> chunks,
                            std::span<const uint8_t> skip_layers) = 0;
  // Root, once at start: the block count of each KV pool, which every rank
  // allocates alike (block ids are shared; each rank holds its shard).
  virtual void publish_pool_sizes(std::span<const int64_t> blocks) = 0;

  // data [n] summed over the stage's tensor-parallel ranks, in place.
  virtual void tp_all_reduce_sum(float* data, int64_t n) = 0;
  // Concatenates each tensor rank's columns of `rows` rows: rank r gives
  // shard [rows, widths[r]]; the stage's tensor rank 0 gets out [rows,
  // sum(widths)] (others: out untouched).
  virtual void tp_gather_columns(const float* shard, int64_t rows, std::span<const int64_t> widths, float* out) = 0;

  // Expert parallelism, among the stage's ranks (rank r = ep_rank r):
  // each rank sends send_bytes[r] bytes (consecutive in `send`, rank 0's
  // first) to rank r and receives recv_bytes[r] from it into `recv` (rank
  // order). The counts must agree pairwise (exchange them first with a
  // fixed-size call).
  virtual void group_all_to_all(const void* send, std::span<const int64_t> send_bytes, void* recv,
                                std::span<const int64_t> recv_bytes) = 0;
  // Every rank's `bytes[self]` bytes from `mine`, concatenated in rank
  // order into `out` on every rank.
  virtual void group_all_gather(const void* mine, std::span<const int64_t> bytes, void* out) = 0;

  // Pipeline: activations to the next stage (same tensor rank), tagged by
  // micro-batch. send_next returns at once (the data is copied); every send
  // is complete after wait_sends().
  virtual void send_next(const float* data, int64_t n, int tag) = 0;
  virtual void recv_prev(float* data, int64_t n, int tag) = 0;
  // Logits rows of one micro-batch: from the last stage's tensor rank 0 to
  // the root (send returns at once, as send_next).
  virtual void send_logits(const float* data, int64_t n, int tag) = 0;
  virtual void recv_logits(float* data, int64_t n, int tag) = 0;
  virtual void wait_sends() = 0;

  virtual CommStats stats() const = 0;
};

}  // namespace tokenmill::model
