// A KV layer group as the scheduler sizes it: the layers whose K/V share one
// pool and one attention span. A model has one group (every layer), or
// several (e.g. Gemma 3: full-attention layers, and sliding-window layers
// that keep only the window's blocks); each group is a pool of its own, a
// block table per sequence and a slot in every prefix-cache entry.
#pragma once

#include <cstdint>

namespace tokenmill::sched {

struct KvGroupConfig {
  int32_t num_blocks = 0;  // its pool (PagedKvStorage::num_blocks())
  // Positions a query attends in this group's layers, itself included: a
  // sequence then holds only the blocks still inside it. 0 = every position.
  int64_t window = 0;
};

}  // namespace tokenmill::sched
