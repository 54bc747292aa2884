#include "dist/mpi_runtime.h"

#include <mpi.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "util/check.h"
#include "util/error.h"

namespace tokenmill::dist {

namespace {

using Clock = std::chrono::steady_clock;

// Adds the time from construction to destruction, one operation and
// `bytes` to the stats.
class Timed {
 public:
  Timed(model::CommStats& stats, int64_t bytes) : stats_(stats), start_(Clock::now()) {
    stats_.bytes += static_cast<uint64_t>(bytes);
    ++stats_.syncs;
  }
  ~Timed() { stats_.seconds += std::chrono::duration<double>(Clock::now() - start_).count(); }

 private:
  model::CommStats& stats_;
  Clock::time_point start_;
};

void check_mpi(int rc, const char* what) {
  if (rc != MPI_SUCCESS) fail("MPI {} failed (error {})", what, rc);
}

constexpr int kLogitsTagBase = 1 << 20;

}  // namespace

bool launched_by_mpirun() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("PMIX_RANK") != nullptr;
}

void abort_parallel_run(int code) {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized) return;
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size > 1) MPI_Abort(MPI_COMM_WORLD, code);
}

struct MpiRuntime::Impl {
  MPI_Comm tp_comm = MPI_COMM_NULL;  // the ranks of this rank's pipeline stage
  // Sends in flight: their buffers must live until they complete.
  std::deque<std::vector<float>> send_buffers;
  std::vector<MPI_Request> send_requests;
};

std::unique_ptr<MpiRuntime> MpiRuntime::start(int tp, int pp, int64_t microbatches, int ep) {
  if (tp < 1 || pp < 1 || ep < 1)
    fail("--tp, --pp and --ep must be at least 1 (got --tp {} --pp {} --ep {})", tp, pp, ep);
  if (tp > 1 && ep > 1 && tp != ep)
    fail("--tp {} --ep {}: expert parallelism runs over the tensor-parallel ranks (give --tp {} or --tp 1)", tp, ep,
         ep);
  if (ep > 1 && pp > 1) fail("--ep with --pp is not supported (expert parallelism runs in one pipeline stage)");
  const int group = std::max(tp, ep);
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    int provided = 0;
    check_mpi(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided), "init");
    if (provided < MPI_THREAD_SERIALIZED) fail("this MPI library cannot give MPI_THREAD_SERIALIZED threading");
  }
  std::unique_ptr<MpiRuntime> rt(new MpiRuntime());
  rt->impl_ = std::make_unique<Impl>();
  MPI_Comm_rank(MPI_COMM_WORLD, &rt->world_rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &rt->world_size_);
  if (rt->world_size_ != group * pp)
    fail("--tp {} --pp {}{} needs {} ranks, mpirun started {} (mpirun -np {} tokenmill ...)", tp, pp,
         ep > 1 ? fmt::format(" --ep {}", ep) : std::string(), group * pp, rt->world_size_, group * pp);
  const int group_rank = rt->world_rank_ % group;
  rt->shard_.tp_size = tp;
  rt->shard_.pp_size = pp;
  rt->shard_.tp_rank = tp > 1 ? group_rank : 0;  // tp 1 under ep: attention replicated
  rt->shard_.ep_size = ep;
  rt->shard_.ep_rank = ep > 1 ? group_rank : 0;
  rt->shard_.pp_stage = rt->world_rank_ / group;
  rt->shard_.microbatches = microbatches;
  check_mpi(MPI_Comm_split(MPI_COMM_WORLD, rt->shard_.pp_stage, group_rank, &rt->impl_->tp_comm), "split");
  return rt;
}

MpiRuntime::~MpiRuntime() {
  try {
    if (is_root() && world_size_ > 1 && !stopped_) broadcast(encode_stop());
    wait_sends();
  } catch (...) {  // nothing more to tell the others: finalize anyway
  }
  if (impl_ && impl_->tp_comm != MPI_COMM_NULL) MPI_Comm_free(&impl_->tp_comm);
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

void MpiRuntime::broadcast(const std::vector<int64_t>& message) {
  TM_CHECK(is_root());
  Timed t(stats_, static_cast<int64_t>((message.size() + 1) * sizeof(int64_t)));
  // Non-blocking for the length: the others wait for it with MPI_Test (and
  // a non-blocking collective only matches a non-blocking one).
  int64_t length = static_cast<int64_t>(message.size());
  MPI_Request req;
  check_mpi(MPI_Ibcast(&length, 1, MPI_INT64_T, 0, MPI_COMM_WORLD, &req), "broadcast");
  check_mpi(MPI_Wait(&req, MPI_STATUS_IGNORE), "broadcast");
  check_mpi(MPI_Bcast(const_cast<int64_t*>(message.data()), static_cast<int>(length), MPI_INT64_T, 0, MPI_COMM_WORLD),
            "broadcast");
  if (message_kind(message) == MessageKind::kStop) stopped_ = true;
}

std::vector<int64_t> MpiRuntime::receive_broadcast(bool idle_wait) {
  int64_t length = 0;
  MPI_Request req;
  check_mpi(MPI_Ibcast(&length, 1, MPI_INT64_T, 0, MPI_COMM_WORLD, &req), "broadcast");
  // The root may be idle for a long time: poll, yielding for the first
  // millisecond (steps follow each other closely), then sleeping.
  const Clock::time_point start = Clock::now();
  for (int done = 0;;) {
    check_mpi(MPI_Test(&req, &done, MPI_STATUS_IGNORE), "broadcast");
    if (done) break;
    if (!idle_wait || Clock::now() - start < std::chrono::milliseconds(1)) {
      sched_yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }
  std::vector<int64_t> message(static_cast<size_t>(length));
  check_mpi(MPI_Bcast(message.data(), static_cast<int>(length), MPI_INT64_T, 0, MPI_COMM_WORLD), "broadcast");
  return message;
}

void MpiRuntime::publish_pool_sizes(std::span<const int64_t> blocks) { broadcast(encode_pool_sizes(blocks)); }

std::vector<int64_t> MpiRuntime::receive_pool_sizes() {
  const std::vector<int64_t> m = receive_broadcast(false);
  if (message_kind(m) == MessageKind::kStop)
    fail("rank {}: rank 0 stopped before it was ready (see its error)", world_rank_);
  return decode_pool_sizes(m);
}

std::optional<DecodedStep> MpiRuntime::next_step() {
  const std::vector<int64_t> m = receive_broadcast(true);
  if (message_kind(m) == MessageKind::kStop) return std::nullopt;
  return decode_forward(m);
}

void MpiRuntime::publish_step(std::span<const std::vector<kv::BlockCopy>> copies,
                              std::span<const model::SequenceChunk> chunks, std::span<const uint8_t> skip_layers) {
  if (world_size_ > 1) broadcast(encode_forward(copies, chunks, skip_layers));
}

void MpiRuntime::tp_all_reduce_sum(float* data, int64_t n) {
  Timed t(stats_, 2 * n * static_cast<int64_t>(sizeof(float)));  // sent and received
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, data, static_cast<int>(n), MPI_FLOAT, MPI_SUM, impl_->tp_comm), "all-reduce");
}

void MpiRuntime::tp_gather_columns(const float* shard, int64_t rows, std::span<const int64_t> widths, float* out) {
  const int64_t mine = widths[static_cast<size_t>(shard_.tp_rank)];
  Timed t(stats_, rows * mine * static_cast<int64_t>(sizeof(float)));
  // Gathered rank by rank ([rank][rows, width]), then interleaved into rows.
  std::vector<int> counts, displs;
  int64_t total = 0;
  for (int64_t w : widths) {
    counts.push_back(static_cast<int>(rows * w));
    displs.push_back(static_cast<int>(total));
    total += rows * w;
  }
  std::vector<float> gathered(shard_.tp_rank == 0 ? static_cast<size_t>(total) : 0);
  check_mpi(MPI_Gatherv(shard, static_cast<int>(rows * mine), MPI_FLOAT, gathered.data(), counts.data(), displs.data(),
                        MPI_FLOAT, 0, impl_->tp_comm),
            "gather");
  if (shard_.tp_rank != 0) return;
  const int64_t full = total / std::max<int64_t>(rows, 1);
  int64_t col = 0;
  for (size_t r = 0; r < widths.size(); ++r) {
    const float* src = gathered.data() + displs[r];
    for (int64_t i = 0; i < rows; ++i)
      std::memcpy(out + i * full + col, src + i * widths[r], static_cast<size_t>(widths[r]) * sizeof(float));
    col += widths[r];
  }
}

namespace {

// MPI's int counts and displacements of byte counts (each under 2 GiB).
void byte_layout(std::span<const int64_t> bytes, std::vector<int>& counts, std::vector<int>& displs) {
  int64_t at = 0;
  for (int64_t b : bytes) {
    if (b < 0 || at + b > INT32_MAX) fail("an expert-parallel exchange of {} bytes exceeds MPI's 2 GiB count", at + b);
    counts.push_back(static_cast<int>(b));
    displs.push_back(static_cast<int>(at));
    at += b;
  }
}

}  // namespace

void MpiRuntime::group_all_to_all(const void* send, std::span<const int64_t> send_bytes, void* recv,
                                  std::span<const int64_t> recv_bytes) {
  std::vector<int> sc, sd, rc, rd;
  byte_layout(send_bytes, sc, sd);
  byte_layout(recv_bytes, rc, rd);
  int64_t moved = 0;  // what crosses to or from another rank
  for (size_t r = 0; r < send_bytes.size(); ++r)
    if (static_cast<int>(r) != shard_.ep_rank) moved += send_bytes[r] + recv_bytes[r];
  Timed t(stats_, moved);
  check_mpi(MPI_Alltoallv(send, sc.data(), sd.data(), MPI_BYTE, recv, rc.data(), rd.data(), MPI_BYTE, impl_->tp_comm),
            "all-to-all");
}

void MpiRuntime::group_all_gather(const void* mine, std::span<const int64_t> bytes, void* out) {
  std::vector<int> counts, displs;
  byte_layout(bytes, counts, displs);
  int64_t moved = 0;
  for (int64_t b : bytes) moved += b;
  Timed t(stats_, moved);  // its own bytes sent to the others, theirs received
  check_mpi(MPI_Allgatherv(mine, counts[static_cast<size_t>(shard_.ep_rank)], MPI_BYTE, out, counts.data(),
                           displs.data(), MPI_BYTE, impl_->tp_comm),
            "all-gather");
}

void MpiRuntime::isend(const float* data, int64_t n, int dest, int tag) {
  Timed t(stats_, n * static_cast<int64_t>(sizeof(float)));
  std::vector<float>& buf = impl_->send_buffers.emplace_back(data, data + n);
  MPI_Request& req = impl_->send_requests.emplace_back();
  check_mpi(MPI_Isend(buf.data(), static_cast<int>(n), MPI_FLOAT, dest, tag, MPI_COMM_WORLD, &req), "send");
}

void MpiRuntime::send_next(const float* data, int64_t n, int tag) {
  TM_CHECK(!shard_.last_stage());
  isend(data, n, world_rank_ + shard_.tp_size, tag);
}

void MpiRuntime::recv_prev(float* data, int64_t n, int tag) {
  TM_CHECK(!shard_.first_stage());
  Timed t(stats_, n * static_cast<int64_t>(sizeof(float)));
  check_mpi(MPI_Recv(data, static_cast<int>(n), MPI_FLOAT, world_rank_ - shard_.tp_size, tag, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE),
            "receive");
}

void MpiRuntime::send_logits(const float* data, int64_t n, int tag) { isend(data, n, 0, kLogitsTagBase + tag); }

void MpiRuntime::recv_logits(float* data, int64_t n, int tag) {
  TM_CHECK(is_root());
  Timed t(stats_, n * static_cast<int64_t>(sizeof(float)));
  const int last_stage_root = (shard_.pp_size - 1) * shard_.tp_size;
  check_mpi(MPI_Recv(data, static_cast<int>(n), MPI_FLOAT, last_stage_root, kLogitsTagBase + tag, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE),
            "receive");
}

void MpiRuntime::wait_sends() {
  if (!impl_ || impl_->send_requests.empty()) return;
  const Clock::time_point start = Clock::now();
  check_mpi(
      MPI_Waitall(static_cast<int>(impl_->send_requests.size()), impl_->send_requests.data(), MPI_STATUSES_IGNORE),
      "wait");
  stats_.seconds += std::chrono::duration<double>(Clock::now() - start).count();
  impl_->send_requests.clear();
  impl_->send_buffers.clear();
}

}  // namespace tokenmill::dist
