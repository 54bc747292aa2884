#include "model/moe_expert_parallel.h"

#include <algorithm>
#include <cstring>

#include "kernels/matmul.h"
#include "model/shard.h"
#include "util/check.h"

namespace tokenmill::model {
namespace {

template <typename T>
void grow(std::vector<T>& v, int64_t n) {
  if (static_cast<int64_t>(v.size()) < n) v.resize(static_cast<size_t>(n));
}

// Byte counts per rank of `rows` rows of `row_bytes` each.
std::vector<int64_t> bytes_of(std::span<const int64_t> rows, int64_t row_bytes) {
  std::vector<int64_t> b;
  for (int64_t r : rows) b.push_back(r * row_bytes);
  return b;
}

// The rank holding each expert: [n_expert].
std::vector<int> expert_owners(const ModelConfig& c, const ModelShard& shard) {
  std::vector<int> owner(static_cast<size_t>(c.n_expert));
  for (int r = 0; r < shard.ep_size; ++r) {
    ModelShard other = shard;
    other.ep_rank = r;
    const IndexRange part = expert_part(c, other);
    for (int64_t e = part.begin; e < part.end; ++e) owner[static_cast<size_t>(e)] = r;
  }
  return owner;
}

// Packs the own tokens' (token, expert) pairs by destination rank (pair
// order within each) into ep's send buffers, and records where each pair's
// row goes (own_slot_row). Returns the pair count per rank.
std::vector<int64_t> pack_own_pairs(const ExpertRouting& routing, std::span<const int> owner, IndexRange own, int ranks,
                                    const float* in, int64_t D, ExpertParallelScratch& ep) {
  const int64_t k = routing.k;
  std::vector<int64_t> send_count(static_cast<size_t>(ranks), 0);
  for (int64_t i = own.begin * k; i < own.end * k; ++i)
    ++send_count[static_cast<size_t>(owner[static_cast<size_t>(routing.experts[static_cast<size_t>(i)])])];
  std::vector<int64_t> next(send_count.size(), 0);
  for (size_t r = 1; r < next.size(); ++r) next[r] = next[r - 1] + send_count[r - 1];
  const int64_t sent = own.size() * k;
  grow(ep.send_pairs, sent);
  grow(ep.send_rows, sent * D);
  grow(ep.send_ids, sent);
  grow(ep.own_slot_row, sent);
  for (int64_t i = own.begin * k; i < own.end * k; ++i) {
    const int32_t e = routing.experts[static_cast<size_t>(i)];
    const int64_t at = next[static_cast<size_t>(owner[static_cast<size_t>(e)])]++;
    ep.send_pairs[static_cast<size_t>(at)] = i;
    ep.send_ids[static_cast<size_t>(at)] = e;
    std::memcpy(ep.send_rows.data() + at * D, in + (i / k) * D, static_cast<size_t>(D) * sizeof(float));
    ep.own_slot_row[static_cast<size_t>(i - own.begin * k)] = at;
  }
  return send_count;
}

// Sends the packed pairs to their experts' ranks: the counts, then the
// experts' ids and rows. Returns the row count received from each rank.
std::vector<int64_t> exchange_pairs(ParallelComm& comm, std::span<const int64_t> send_count, int64_t D,
                                    ExpertParallelScratch& ep) {
  const size_t ranks = send_count.size();
  std::vector<int64_t> recv_count(ranks, 0);
  comm.group_all_to_all(send_count.data(), std::vector<int64_t>(ranks, sizeof(int64_t)), recv_count.data(),
                        std::vector<int64_t>(ranks, sizeof(int64_t)));
  int64_t received = 0;
  for (int64_t r : recv_count) received += r;
  grow(ep.recv_ids, received);
  grow(ep.recv_rows, received * D);
  comm.group_all_to_all(ep.send_ids.data(), bytes_of(send_count, sizeof(int32_t)), ep.recv_ids.data(),
                        bytes_of(recv_count, sizeof(int32_t)));
  comm.group_all_to_all(ep.send_rows.data(), bytes_of(send_count, D * sizeof(float)), ep.recv_rows.data(),
                        bytes_of(recv_count, D * sizeof(float)));
  return recv_count;
}

// This rank's experts over the `received` rows, into ep.back_rows in
// received order: grouped by expert in received order (source rank, then
// pair order: one process's order).
void run_received_experts(const LayerWeights& w, const ModelConfig& c, int64_t received, ExpertCompute mode,
                          MoeScratch& s, ExpertParallelScratch& ep, ThreadPool& pool) {
  const int64_t D = c.n_embd;
  std::vector<int64_t> row_of;
  group_rows_by_expert(std::span<const int32_t>(ep.recv_ids.data(), static_cast<size_t>(received)), c.n_expert,
                       s.offsets, row_of);
  grow(s.x, received * D);
  for (int64_t i = 0; i < received; ++i)
    std::memcpy(s.x.data() + row_of[static_cast<size_t>(i)] * D, ep.recv_rows.data() + i * D,
                static_cast<size_t>(D) * sizeof(float));
  if (received > 0) run_experts(w, c, s.offsets, mode, s, pool);
  grow(ep.back_rows, received * D);
  for (int64_t i = 0; i < received; ++i)
    std::memcpy(ep.back_rows.data() + i * D, s.y.data() + row_of[static_cast<size_t>(i)] * D,
                static_cast<size_t>(D) * sizeof(float));
}

}  // namespace

void moe_ffn_expert_parallel(const LayerWeights& w, const ModelConfig& c, const ModelShard& shard, ParallelComm& comm,
                             const float* in, int64_t num_tokens, float* out, ExpertCompute mode, MoeScratch& s,
                             ExpertParallelScratch& ep, ThreadPool& pool, std::span<int64_t> expert_tokens) {
  TM_CHECK(c.is_moe() && shard.expert_parallel());
  const int n = shard.ep_size;
  const int64_t T = num_tokens, k = c.n_expert_used, D = c.n_embd;
  // Every token's routing, as one process computes it.
  grow(s.logits, T * c.n_expert);
  if (T > 0) kernels::matmul(w.router, in, T, s.logits.data(), pool);
  route_tokens(s.logits.data(), T, c.n_expert, k, c.expert_weights_norm, s.routing);
  if (!expert_tokens.empty())
    for (int32_t e : s.routing.experts) ++expert_tokens[static_cast<size_t>(e)];

  // Own tokens' pairs to their experts' ranks, the experts there, and
  // their outputs back.
  const IndexRange own = even_part(T, n, shard.ep_rank);
  const std::vector<int64_t> send_count = pack_own_pairs(s.routing, expert_owners(c, shard), own, n, in, D, ep);
  const std::vector<int64_t> recv_count = exchange_pairs(comm, send_count, D, ep);
  int64_t received = 0;
  for (int64_t r : recv_count) received += r;
  run_received_experts(w, c, received, mode, s, ep, pool);
  const int64_t sent = own.size() * k;
  grow(ep.returned, sent * D);
  comm.group_all_to_all(ep.back_rows.data(), bytes_of(recv_count, D * sizeof(float)), ep.returned.data(),
                        bytes_of(send_count, D * sizeof(float)));

  // Own tokens combined as one process would, then everyone's gathered.
  ep.own_routing.num_tokens = own.size();
  ep.own_routing.k = k;
  ep.own_routing.experts.assign(s.routing.experts.begin() + own.begin * k, s.routing.experts.begin() + own.end * k);
  ep.own_routing.weights.assign(s.routing.weights.begin() + own.begin * k, s.routing.weights.begin() + own.end * k);
  const bool shared = c.n_ff_shexp > 0 && w.shexp_gate.present();
  if (shared && own.size() > 0) run_shared_expert(w, c, in + own.begin * D, own.size(), s, pool);
  grow(ep.own_out, own.size() * D);
  combine_experts(ep.own_routing, std::span<const int64_t>(ep.own_slot_row.data(), static_cast<size_t>(sent)),
                  ep.returned.data(), shared ? s.shared.data() : nullptr, D, ep.own_out.data(), pool);
  std::vector<int64_t> rows(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) rows[static_cast<size_t>(r)] = even_part(T, n, r).size();
  comm.group_all_gather(ep.own_out.data(), bytes_of(rows, D * sizeof(float)), out);
}

}  // namespace tokenmill::model
