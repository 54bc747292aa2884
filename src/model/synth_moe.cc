#include "model/synth_moe.h"

#include <fmt/format.h>

#include "util/error.h"

namespace tokenmill::model {
namespace {

constexpr int64_t kDefaultExperts = 4;
constexpr int64_t kDefaultExpertsUsed = 2;
constexpr int64_t kMaxExperts = 4096;

bool states_expert_width(SynthArch arch) { return arch == SynthArch::kQwen2Moe || arch == SynthArch::kQwen3Moe; }

}  // namespace

bool synth_arch_is_moe(SynthArch arch) {
  return arch == SynthArch::kQwen2Moe || arch == SynthArch::kQwen3Moe || arch == SynthArch::kOlmoe;
}

void resolve_synth_experts(SynthArch arch, const ShapeOverrides& o, SynthShape& s) {
  const bool any_flag = o.n_expert || o.n_expert_used || o.n_ff_exp || o.n_ff_shexp;
  const bool moe = synth_arch_is_moe(arch) || (arch == SynthArch::kLlama && (o.n_expert || s.n_expert > 0));
  if (!moe) {
    if (any_flag)
      fail("--arch {} has no experts (expert flags apply to qwen2moe, qwen3moe, olmoe, and llama with --n-expert)",
           synth_arch_name(arch));
    s.n_expert = s.n_expert_used = s.n_ff_exp = s.n_ff_shexp = 0;
    return;
  }
  const bool preset_moe = s.n_expert > 0;
  s.n_expert = o.n_expert.value_or(preset_moe ? s.n_expert : kDefaultExperts);
  s.n_expert_used = o.n_expert_used.value_or(preset_moe ? s.n_expert_used : std::min(kDefaultExpertsUsed, s.n_expert));
  if (s.n_expert < 1 || s.n_expert > kMaxExperts) fail("--n-expert must be in 1..{}, got {}", kMaxExperts, s.n_expert);
  if (s.n_expert_used < 1 || s.n_expert_used > s.n_expert)
    fail("--n-expert-used must be in 1..{} (--n-expert), got {}", s.n_expert, s.n_expert_used);
  if (states_expert_width(arch)) {
    s.n_ff_exp = o.n_ff_exp.value_or(preset_moe ? s.n_ff_exp : std::max<int64_t>(1, s.n_ff / 2));
  } else {
    // The FFN width is the experts' width: --n-ff-exp, else --n-ff, else the preset's expert width.
    s.n_ff_exp = o.n_ff_exp.value_or(o.n_ff.value_or(preset_moe ? s.n_ff_exp : s.n_ff));
    s.n_ff = s.n_ff_exp;
  }
  if (s.n_ff_exp < 1) fail("--n-ff-exp must be positive, got {}", s.n_ff_exp);
  if (arch == SynthArch::kQwen2Moe) {
    s.n_ff_shexp = o.n_ff_shexp.value_or(s.n_ff_shexp > 0 ? s.n_ff_shexp : s.n_ff);
    if (s.n_ff_shexp < 1) fail("--n-ff-shexp must be positive, got {}", s.n_ff_shexp);
  } else if (o.n_ff_shexp) {
    fail("--n-ff-shexp: only qwen2moe has a shared expert");
  } else {
    s.n_ff_shexp = 0;
  }
}

void set_expert_keys(gguf::GgufWriter& w, SynthArch arch, const SynthShape& s) {
  if (s.n_expert == 0) return;
  const std::string a(synth_arch_name(arch));
  auto u32 = [&](std::string_view key, int64_t v) {
    w.set(fmt::format("{}.{}", a, key), gguf::Value::u32(static_cast<uint32_t>(v)));
  };
  u32("expert_count", s.n_expert);
  u32("expert_used_count", s.n_expert_used);
  if (states_expert_width(arch)) u32("expert_feed_forward_length", s.n_ff_exp);
  if (s.n_ff_shexp > 0) u32("expert_shared_feed_forward_length", s.n_ff_shexp);
}

}  // namespace tokenmill::model
