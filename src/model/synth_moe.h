// The mixture-of-experts side of synthetic models (synth.h): which
// architectures route tokens to experts, their expert shape and the GGUF
// keys that state it.
#pragma once

#include "gguf/writer.h"
#include "model/synth.h"

namespace tokenmill::model {

// qwen2moe, qwen3moe and olmoe always have experts; llama gets them (the
// Mixtral layout) when --n-expert is given.
bool synth_arch_is_moe(SynthArch arch);

// Fills in s's expert fields from the overrides, else the preset's, else
// (a MoE architecture on a dense preset) 4 experts, 2 per token, each half
// the FFN width; qwen2moe's shared expert has the FFN width. llama and
// olmoe files state no expert width (it is the FFN width), so there n_ff
// and n_ff_exp are one value (--n-ff-exp sets both). Throws Error for an
// impossible shape (experts per token outside 1..experts, expert flags on
// a dense architecture).
void resolve_synth_experts(SynthArch arch, const ShapeOverrides& o, SynthShape& s);

// ARCH.expert_count, expert_used_count and, for the Qwen MoE files, the
// expert widths. Nothing for a dense shape.
void set_expert_keys(gguf::GgufWriter& writer, SynthArch arch, const SynthShape& s);

}  // namespace tokenmill::model
