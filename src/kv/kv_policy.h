// Long-context KV policies for full-attention models: what a sequence keeps
// in its KV cache once it outgrows a budget.
//
// kFull keeps every position (today's behaviour). kStreaming (StreamingLLM:
// attention sinks plus a recent window) keeps the first `sinks` positions
// and the last `window` ones and drops the middle, a whole block at a time:
// before each step, every block past the sink blocks whose positions all lie
// before the window of the step's first query goes. Sinks are rounded up to
// whole blocks (block_size 16 and sinks 4 keep 16 positions), so a sequence
// holds at most ceil(sinks / bs) + ceil(window / bs) + 1 blocks plus what one
// step appends.
//
// kHeavyHitter (H2O) keeps a per-sequence budget of positions: the sinks,
// the recent window, and the blocks whose keys drew the most attention.
// The attention kernels add every query head's softmax weight of each key
// to the sequence's mass (kernels/paged_attention.h; the full-attention
// layers only: a sliding-window layer would only ever vote for its window);
// before each step, while the cache holds more than `budget` positions,
// the block with the least accumulated mass among those wholly before the
// window (and after the sinks) goes, the older first on a tie. Whole
// blocks: the pool, prefix cache and rotations work in blocks, and a block
// of 16 keys is the unit the kernels read.
//
// Dropping block k shifts every later position down by block_size in the
// cache ("cache index" = token position minus the evicted slots before it).
// Two ways to give the kept keys their RoPE positions:
//   kPreserve: every key keeps the rotation of its true token position and
//     new tokens are rotated at their true positions, so the distances
//     between a query and the recent keys are exact and the sinks look as
//     far away as they are. Positions still grow with the sequence, so the
//     model's trained context (and max_model_len) still bounds a request.
//   kRerotate: positions are cache indices (StreamingLLM's choice): when a
//     block goes, the keys after it are rotated back by block_size positions
//     in place (dequantized, rotated, requantized for the quantized types),
//     so every position stays below sinks + window + one step and a request
//     may run past the model's trained context.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tokenmill::kv {

// Rotate the keys of every position of `block` by delta positions (RoPE),
// in every layer of the block's pool (kPositions kRerotate).
struct KeyShift {
  int32_t block = -1;
  int64_t delta = 0;
  bool operator==(const KeyShift&) const = default;
};

enum class KvPolicyKind { kFull, kStreaming, kHeavyHitter };
enum class KvPositions { kPreserve, kRerotate };

struct KvPolicy {
  KvPolicyKind kind = KvPolicyKind::kFull;
  int64_t sinks = 4;      // first positions always kept (rounded up to blocks)
  int64_t window = 1024;  // most recent positions kept
  KvPositions positions = KvPositions::kPreserve;
  int64_t budget = 2048;  // kHeavyHitter: most positions kept before a step

  bool evicts() const { return kind != KvPolicyKind::kFull; }
  // Whether the attention kernels must accumulate each key's mass for it.
  bool needs_attention_mass() const { return kind == KvPolicyKind::kHeavyHitter; }
  // Whether the RoPE positions stay below max_blocks() * block_size
  // whatever the sequence's length (it evicts and re-rotates), so that the
  // model's trained context bounds those positions and not the request.
  bool bounds_positions() const { return evicts() && positions == KvPositions::kRerotate; }
  // Throws Error naming the bad field (window < 1, sinks < 0, a budget
  // smaller than sinks + window).
  void validate() const;
  // "full", "streaming(sinks=4,window=1024,positions=preserve)" or
  // "h2o(sinks=4,window=256,budget=1024,positions=preserve)": the cache
  // namespace's and the logs' name for it.
  std::string describe() const;
  // Blocks always kept at the front: ceil(sinks / block_size).
  int64_t sink_blocks(int64_t block_size) const { return (sinks + block_size - 1) / block_size; }
  // Most blocks a sequence holds after the eviction before a step of
  // step_tokens (sinks, window, the step, and one partly filled block).
  int64_t max_blocks(int64_t block_size, int64_t step_tokens) const;
};

// The logical blocks to evict before a step (ascending, original indices),
// from a cache of `cached` positions: streaming's blocks_to_evict() blocks
// from sink_blocks(); for kHeavyHitter the least-mass candidates (blocks
// after the sinks, wholly before the window) until at most `budget`
// positions remain. mass[i]: the accumulated attention mass of cache
// index i (missing entries count as 0). Empty for kFull.
std::vector<int64_t> blocks_to_evict_now(const KvPolicy& policy, int64_t cached, int64_t block_size,
                                         std::span<const float> mass = {});

// How many of the ascending `evicted` blocks lie before logical block
// `block` (original indices): a kept block moves down by that many blocks.
int64_t evicted_before(std::span<const int64_t> evicted, int64_t block);

// Removes the evicted blocks' positions (ascending, original indices) from
// a per-position array such as the attention mass.
void erase_evicted_positions(std::vector<float>& per_position, std::span<const int64_t> evicted, int64_t block_size);

// How many blocks to evict, one after the other at logical block
// sink_blocks(block_size), from a cache of `cached` positions before a step
// whose first query is at cache index `cached`: each block whose every
// position is before that query's window (index cached - window + 1),
// counting that each eviction moves the query down by block_size. 0 unless
// kStreaming.
int64_t blocks_to_evict(const KvPolicy& policy, int64_t cached, int64_t block_size);

// The streaming policy with these sinks, window and positions, validated
// (Error for window < 1 or sinks < 0).
KvPolicy streaming_policy(int64_t sinks, int64_t window, KvPositions positions = KvPositions::kPreserve);

// The heavy-hitter policy with these sinks, window and budget, validated.
KvPolicy heavy_hitter_policy(int64_t sinks, int64_t window, int64_t budget,
                             KvPositions positions = KvPositions::kPreserve);

// The policy the flags --kv-policy KIND --kv-sinks --kv-window
// --kv-positions --kv-budget describe, validated. Throws Error naming the
// bad flag.
KvPolicy make_kv_policy(std::string_view kind, int64_t sinks, int64_t window, std::string_view positions,
                        int64_t budget = KvPolicy{}.budget);

std::optional<KvPolicyKind> kv_policy_kind_from_name(std::string_view name);  // "full", "streaming", "h2o"
std::optional<KvPositions> kv_positions_from_name(std::string_view name);     // "preserve", "rerotate"
std::string_view kv_positions_name(KvPositions positions);

}  // namespace tokenmill::kv
