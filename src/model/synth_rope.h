// RoPE scaling of synthetic models (`tokenmill synth --rope-scaling ...`):
// the keys, and for llama3 the rope_freqs tensor, that real long-context
// models carry, so that scaling can be tested past the original context on
// small files.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "gguf/writer.h"
#include "model/config.h"

namespace tokenmill::model {

struct SynthRope {
  RopeScalingType type = RopeScalingType::kNone;
  double factor = 1.0;       // context extension factor (linear, yarn, llama3)
  int64_t orig_ctx = 0;      // original context (yarn, llama3); 0: the file's context_length
  double attn_factor = 1.0;  // rope.scaling.attn_factor, written when not 1
};

// Writes ARCH.rope.scaling.* for `rope` into a writer that already holds
// the architecture's keys (context_length, rope.freq_base,
// rope.dimension_count or the head size). llama3 writes no type key (as
// the Llama 3.1 conversions) but the F32 tensor rope_freqs.weight
// [rope_dims / 2]: the divisors of each pair's frequency by Llama 3.1's rule
// (low_freq_factor 1, high_freq_factor 4, old context orig_ctx). Throws
// Error for a non-positive factor or original context. longrope (phi3)
// writes rope_factors_long/short [rope_dims / 2] (divisors rising
// geometrically to factor, and to 1 + factor / 10), the original context and
// Phi-3's attention factor sqrt(1 + ln(ctx / orig) / ln(orig)).
void add_synth_rope_scaling(gguf::GgufWriter& w, const SynthRope& rope);

}  // namespace tokenmill::model
