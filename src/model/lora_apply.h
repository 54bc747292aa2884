// Applying LoRA deltas inside a batch whose chunks use different adapters
// (or none): after the shared base product y = W x, each adapter's rows
// get y += scale * B (A x) for that adapter alone. Rows are grouped by
// adapter so each adapter's A and B are read once per product, whatever
// the number of its requests; nothing is merged into W.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "model/lora_adapter.h"
#include "util/thread_pool.h"

namespace tokenmill::model {

struct SequenceChunk;

// The rows of a flat batch that one adapter applies to, ascending.
struct LoraRows {
  const LoraAdapter* adapter = nullptr;
  std::vector<int64_t> rows;
};

// The chunks' token rows (one per token, in chunk order) grouped by
// adapter; chunks without one are left out. Empty when no chunk has one.
std::vector<LoraRows> lora_token_rows(std::span<const SequenceChunk> chunks);
// The same for the chunks' logits rows (model.h num_logit_rows).
std::vector<LoraRows> lora_logit_rows(std::span<const SequenceChunk> chunks);

// Buffers reused between products (one per model: forward is one caller at
// a time).
struct LoraScratch {
  std::vector<float> x, t, u;
};

// y[row] += pair.scale * B (A x[row]) for every row of every group whose
// adapter has a delta for this product (`pick` names it: one layer's slot,
// or the output projection). x: [*, n_in] rows; y: [*, n_out] rows, the
// base product already in it.
void add_lora_deltas(std::span<const LoraRows> groups, const std::function<const LoraPair&(const LoraAdapter&)>& pick,
                     const float* x, float* y, ThreadPool& pool, LoraScratch& scratch);

// The same computed directly in double precision, one row at a time (the
// reference for tests).
void add_lora_deltas_ref(std::span<const LoraRows> groups,
                         const std::function<const LoraPair&(const LoraAdapter&)>& pick, const float* x, float* y);

}  // namespace tokenmill::model
