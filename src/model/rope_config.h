// RoPE scaling: what a GGUF file's rope.scaling.* keys (and rope_freqs
// tensor) say, the user's overrides of it (--rope-scaling, --rope-scale,
// --rope-freq-base, --yarn-orig-ctx, --ctx), and the kernel parameters of a
// layer. Kept apart from config.cc so that one file holds every rule about
// positions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gguf/reader.h"
#include "kernels/rope.h"
#include "model/config.h"

namespace tokenmill::model {

// "none", "linear", "yarn", "llama3", "longrope".
const char* rope_scaling_name(RopeScalingType type);
// The choices of rope.scaling.type / --rope-scaling, for messages.
const char* rope_scaling_choices();

// Fills c's rope_scaling* / yarn_* fields and rope_freq_scale(_local) from
// the file (rope.scaling.type, .factor, .original_context_length,
// .attn_factor, .yarn_ext_factor, .yarn_beta_fast, .yarn_beta_slow; a
// rope_freqs tensor makes it llama3). Needs n_ctx_train and rope_base set.
// Throws Error naming the file, the key and the supported values for an
// unknown type, a non-positive or non-finite factor, a YaRN without a
// factor, or keys tokenmill does not implement (yarn_log_multiplier).
void read_rope_scaling(const gguf::GgufFile& f, ModelConfig& c);

// What the command line may change, as llama.cpp spells it: --rope-scaling
// TYPE, --rope-scale N (context extension factor; positions are divided by
// it), --rope-freq-base, --yarn-orig-ctx, and -c/--ctx beyond the file's
// training context. Unset: the file's value.
struct RopeOverrides {
  std::optional<std::string> scaling = std::nullopt;  // none | linear | yarn
  std::optional<double> scale = std::nullopt;
  std::optional<double> freq_base = std::nullopt;
  std::optional<int64_t> yarn_orig_ctx = std::nullopt;
  std::optional<int64_t> ctx = std::nullopt;  // the longest sequence this model instance accepts

  bool empty() const { return !scaling && !scale && !freq_base && !yarn_orig_ctx && !ctx; }
};

// Applies the overrides to c (n_ctx_train becomes ctx when given; the file's
// value stays in n_ctx_file). Returns the warnings to show, e.g. a context
// beyond the trained one without any RoPE scaling. Throws Error naming the
// flag for a bad value (non-positive factor, unknown type).
std::vector<std::string> apply_rope_overrides(ModelConfig& c, const RopeOverrides& o);

// LongRoPE: whether the long factors apply (the context, after -c, exceeds
// the original one), else the short ones; llama.cpp's rule.
bool rope_long_factors(const ModelConfig& c);

// The kernel's parameters for global (local = false) or sliding-window layers.
kernels::RopeScaling rope_scaling_params(const ModelConfig& c, bool local);

// One line for logs and `inspect`: "yarn x4 (original context 64, attn
// factor 1, beta 32/1), base 1e+06, 16 dims, neox".
std::string rope_summary(const ModelConfig& c);

}  // namespace tokenmill::model
