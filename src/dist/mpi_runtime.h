// The MPI side of a sharded model (model/parallel.h): Open MPI, started by
// `mpirun -np N tokenmill serve --tp A --pp B` with N = A x B (or --ep E:
// N = E, expert parallel). World rank r is pipeline stage r / A, tensor
// rank r % A. Rank 0 runs the engine and
// announces every forward pass; the other ranks run worker_loop()
// (dist/worker.h), which waits for those announcements.
//
// Every collective is timed and counted (CommStats): the engine reads the
// root's figures per step to split step time into compute and
// communication.
//
// MPI is initialised with MPI_THREAD_SERIALIZED: the root makes its calls
// from the engine thread, not the thread that initialised MPI, one at a
// time. Thread-safety: one caller at a time.
#pragma once

#include <deque>
#include <memory>
#include <optional>
#include <vector>

#include "dist/step_codec.h"
#include "model/parallel.h"

namespace tokenmill::dist {

// Whether this process was started by mpirun (Open MPI's environment).
bool launched_by_mpirun();
// If MPI is running with more than one rank, ends every rank with `code`
// (a rank that failed would otherwise leave the others waiting forever).
void abort_parallel_run(int code);

class MpiRuntime final : public model::ParallelComm {
 public:
  // Initialises MPI and lays the ranks out: stages of max(tp, ep) ranks.
  // Throws Error when the world size is not that times pp, tp and ep are
  // both above 1 and differ, ep > 1 with pp > 1, or MPI cannot give
  // serialized threading.
  static std::unique_ptr<MpiRuntime> start(int tp, int pp, int64_t microbatches, int ep = 1);
  // The root tells the other ranks to stop; then MPI is finalised.
  ~MpiRuntime() override;
  MpiRuntime(const MpiRuntime&) = delete;
  MpiRuntime& operator=(const MpiRuntime&) = delete;

  int world_rank() const { return world_rank_; }
  int world_size() const { return world_size_; }

  // Non-root: the KV pools' block counts the root published.
  void publish_pool_sizes(std::span<const int64_t> blocks) override;
  std::vector<int64_t> receive_pool_sizes();
  // Non-root: the next forward pass, or nullopt when the root stops.
  // Waits without spinning the CPU while the root is idle.
  std::optional<DecodedStep> next_step();

  const model::ModelShard& shard() const override { return shard_; }
  bool is_root() const override { return world_rank_ == 0; }
  void publish_step(std::span<const std::vector<kv::BlockCopy>> copies, std::span<const model::SequenceChunk> chunks,
                    std::span<const uint8_t> skip_layers) override;
  void tp_all_reduce_sum(float* data, int64_t n) override;
  void tp_gather_columns(const float* shard, int64_t rows, std::span<const int64_t> widths, float* out) override;
  void group_all_to_all(const void* send, std::span<const int64_t> send_bytes, void* recv,
                        std::span<const int64_t> recv_bytes) override;
  void group_all_gather(const void* mine, std::span<const int64_t> bytes, void* out) override;
  void send_next(const float* data, int64_t n, int tag) override;
  void recv_prev(float* data, int64_t n, int tag) override;
  void send_logits(const float* data, int64_t n, int tag) override;
  void recv_logits(float* data, int64_t n, int tag) override;
  void wait_sends() override;
  model::CommStats stats() const override { return stats_; }

 private:
  MpiRuntime() = default;
  // Root: broadcasts a message (its length first, then its elements).
  void broadcast(const std::vector<int64_t>& message);
  std::vector<int64_t> receive_broadcast(bool idle_wait);
  void isend(const float* data, int64_t n, int dest, int tag);

  struct Impl;
  std::unique_ptr<Impl> impl_;
  model::ModelShard shard_;
  int world_rank_ = 0;
  int world_size_ = 1;
  model::CommStats stats_;
  bool stopped_ = false;
};

}  // namespace tokenmill::dist
