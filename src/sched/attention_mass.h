// The heavy-hitter KV policy's score (kv_policy.h): per sequence, the
// attention mass each cache index has received, summed over the steps.
//
// Two owners touch it, each through its own calls, and neither through a
// Sequence: the model runner owns the table and its forward pass adds to
// it (resize, then the kernels add into the span); the Scheduler, handed
// the table at construction, keeps it aligned with the sequence's cache
// (trim, erase_blocks, fork, erase) and reads it to pick the blocks to
// evict (get).
//
// Thread-safety: none (the engine thread). The forward pass's threads
// write only into spans handed out before it starts.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

namespace tokenmill::sched {

class AttentionMass {
 public:
  // `seq`'s mass resized to `num_positions` cache indices (new ones 0), for
  // the forward pass to add to. The span stays valid until the next call
  // for the same sequence (other sequences' entries never move it).
  std::span<float> resize(uint64_t seq, int64_t num_positions);
  // `seq`'s mass per cache index; empty when none was recorded.
  std::span<const float> get(uint64_t seq) const;
  // Drops the mass of indices at and past `num_positions` (no longer cached:
  // rejected draft tokens).
  void trim(uint64_t seq, int64_t num_positions);
  // Removes the positions of the ascending evicted blocks (original
  // indices); later ones move down.
  void erase_blocks(uint64_t seq, std::span<const int64_t> evicted, int64_t block_size);
  // A fork starts with its parent's mass (it shares the parent's cache).
  void fork(uint64_t parent, uint64_t child);
  // The sequence left the cache (preempted or finished).
  void erase(uint64_t seq) { mass_.erase(seq); }
  size_t num_sequences() const { return mass_.size(); }

 private:
  std::unordered_map<uint64_t, std::vector<float>> mass_;  // by sequence id: [cache index]
};

}  // namespace tokenmill::sched
