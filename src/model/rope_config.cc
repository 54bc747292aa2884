#include "model/rope_config.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "util/error.h"

namespace tokenmill::model {
namespace {

// YaRN's defaults where a file does not store them (the YaRN paper's, and
// llama.cpp's).
constexpr double kYarnBetaFast = 32.0;
constexpr double kYarnBetaSlow = 1.0;

// A positive, finite number from the file, or `fallback` when absent.
double positive_key(const gguf::GgufFile& f, const std::string& key, double fallback) {
  const double v = f.get_float_or(key, fallback);
  if (!(v > 0.0) || !std::isfinite(v)) fail("{}: '{}' must be a positive number, got {}", f.name(), key, v);
  return v;
}

// The factor of a linear or yarn scaling: rope.scaling.factor, or the older
// rope.scale_linear; required.
double scaling_factor(const gguf::GgufFile& f, const std::string& a, const std::string& type) {
  for (const std::string& key : {a + ".rope.scaling.factor", a + ".rope.scale_linear"}) {
    if (f.has(key)) return positive_key(f, key, 1.0);
  }
  fail("{}: rope scaling '{}' needs the key '{}.rope.scaling.factor', which is missing", f.name(), type, a);
}

// Sets the derived fields from type and factor (file and overrides alike).
void derive(ModelConfig& c) {
  const bool stretch = c.rope_scaling == RopeScalingType::kLinear || c.rope_scaling == RopeScalingType::kYarn;
  if (!stretch) c.rope_scaling_factor = 1.0f;
  c.rope_freq_scale = static_cast<float>(1.0 / c.rope_scaling_factor);
  // Gemma 3's sliding-window layers are never stretched (llama.cpp: freq_scale_swa = 1).
  c.rope_freq_scale_local = c.arch == Arch::Gemma3 ? 1.0f : c.rope_freq_scale;
}

}  // namespace

const char* rope_scaling_name(RopeScalingType type) {
  switch (type) {
    case RopeScalingType::kNone: return "none";
    case RopeScalingType::kLinear: return "linear";
    case RopeScalingType::kYarn: return "yarn";
    case RopeScalingType::kLlama3: return "llama3";
    case RopeScalingType::kLongRope: return "longrope";
  }
  return "?";
}

const char* rope_scaling_choices() {
  return "none, linear, yarn, llama3 (the rope_freqs tensor), longrope (phi3's rope_factors_long/short tensors)";
}

bool rope_long_factors(const ModelConfig& c) { return c.n_ctx_train > c.rope_orig_ctx; }

// Scalings that live in the file's tensors: no override can replace them.
bool tensor_scaling(RopeScalingType t) { return t == RopeScalingType::kLlama3 || t == RopeScalingType::kLongRope; }

// phi3 LongRoPE: both factor tensors, or neither (llama.cpp picks one of
// the two by the context; a file with one would fail in half the cases).
void read_long_rope(const gguf::GgufFile& f, ModelConfig& c, const std::string& type_name) {
  const char* kLong = "rope_factors_long.weight";
  const char* kShort = "rope_factors_short.weight";
  const bool has_long = f.find_tensor(kLong) != nullptr;
  const bool has_short = f.find_tensor(kShort) != nullptr;
  if (!has_long && !has_short && c.rope_scaling != RopeScalingType::kLongRope) return;
  if (!has_long || !has_short)
    fail("{}: phi3 LongRoPE needs both tensors '{}' and '{}'; '{}' is missing", f.name(), kLong, kShort,
         has_long ? kShort : kLong);
  if (c.rope_scaling != RopeScalingType::kNone && c.rope_scaling != RopeScalingType::kLongRope)
    fail("{}: '{}.rope.scaling.type' is '{}' but the file carries LongRoPE factor tensors", f.name(), c.arch_name,
         type_name);
  c.rope_scaling = RopeScalingType::kLongRope;
}

void read_rope_scaling(const gguf::GgufFile& f, ModelConfig& c) {
  const std::string a = c.arch_name;
  const std::string type_key = a + ".rope.scaling.type";
  const std::string name = f.get_string_or(type_key, "none");
  const std::optional<RopeScalingType> type = parse_rope_scaling_type(name);
  if (!type)
    fail("{}: '{}' is '{}', which tokenmill does not implement (supported: {})", f.name(), type_key, name,
         rope_scaling_choices());
  const std::string log_mul = a + ".rope.scaling.yarn_log_multiplier";
  if (f.get_float_or(log_mul, 0.0) != 0.0)
    fail("{}: '{}' (DeepSeek-style YaRN attention scaling) is not supported", f.name(), log_mul);

  c.rope_scaling = *type;
  // The llama3 rule lives in the tensor; a file may say so or only carry it.
  if (c.rope_scaling == RopeScalingType::kNone && f.find_tensor("rope_freqs.weight") != nullptr)
    c.rope_scaling = RopeScalingType::kLlama3;
  read_long_rope(f, c, name);
  const bool stretch = c.rope_scaling == RopeScalingType::kLinear || c.rope_scaling == RopeScalingType::kYarn;
  c.rope_scaling_factor = stretch ? static_cast<float>(scaling_factor(f, a, name)) : 1.0f;
  c.rope_attn_factor = static_cast<float>(positive_key(f, a + ".rope.scaling.attn_factor", 1.0));
  c.rope_orig_ctx = f.get_int_or(a + ".rope.scaling.original_context_length", c.n_ctx_train);
  if (c.rope_orig_ctx <= 0)
    fail("{}: '{}.rope.scaling.original_context_length' must be positive, got {}", f.name(), a, c.rope_orig_ctx);
  if (c.rope_scaling == RopeScalingType::kYarn) {
    c.yarn_ext_factor = static_cast<float>(f.get_float_or(a + ".rope.scaling.yarn_ext_factor", 1.0));
    if (!(c.yarn_ext_factor >= 0.0f && c.yarn_ext_factor <= 1.0f))
      fail("{}: '{}.rope.scaling.yarn_ext_factor' must be in [0, 1], got {}", f.name(), a, c.yarn_ext_factor);
    // llama.cpp reads this key only for a few architectures, with meanings
    // of their own: refused rather than guessed.
    const std::string yarn_attn = a + ".rope.scaling.yarn_attn_factor";
    if (f.has(yarn_attn) && f.get_float(yarn_attn) != 1.0)
      fail("{}: '{}' is not supported (rope.scaling.attn_factor is)", f.name(), yarn_attn);
  }
  c.yarn_beta_fast = static_cast<float>(positive_key(f, a + ".rope.scaling.yarn_beta_fast", kYarnBetaFast));
  c.yarn_beta_slow = static_cast<float>(positive_key(f, a + ".rope.scaling.yarn_beta_slow", kYarnBetaSlow));
  derive(c);
}

std::vector<std::string> apply_rope_overrides(ModelConfig& c, const RopeOverrides& o) {
  std::vector<std::string> warnings;
  if (o.scaling) {
    const std::optional<RopeScalingType> type = parse_rope_scaling_type(*o.scaling);
    if (!type || tensor_scaling(*type)) fail("--rope-scaling '{}': expected none, linear or yarn", *o.scaling);
    // The tensors' factors are the model's RoPE (llama.cpp applies them
    // whatever the type says): no type can replace or remove them.
    if (tensor_scaling(c.rope_scaling))
      fail("--rope-scaling {}: the model's RoPE is scaled by its factor tensors ({}), which stay", *o.scaling,
           rope_scaling_name(c.rope_scaling));
    c.rope_scaling = *type;
    if (*type == RopeScalingType::kYarn && c.yarn_ext_factor == 0.0f) c.yarn_ext_factor = 1.0f;
  }
  if (o.scale) {
    if (!(*o.scale > 0.0) || !std::isfinite(*o.scale)) fail("--rope-scale {}: must be a positive number", *o.scale);
    // As llama.cpp: a factor without a type stretches linearly.
    if (c.rope_scaling == RopeScalingType::kNone && !o.scaling) c.rope_scaling = RopeScalingType::kLinear;
    if (tensor_scaling(c.rope_scaling) || c.rope_scaling == RopeScalingType::kNone)
      fail("--rope-scale {}: the RoPE scaling is '{}', which takes no factor", *o.scale,
           rope_scaling_name(c.rope_scaling));
    c.rope_scaling_factor = static_cast<float>(*o.scale);
  } else if (o.scaling && c.rope_scaling != RopeScalingType::kNone && c.rope_scaling_factor == 1.0f) {
    fail("--rope-scaling {}: give the factor with --rope-scale", *o.scaling);
  }
  if (o.freq_base) {
    if (!(*o.freq_base > 0.0) || !std::isfinite(*o.freq_base))
      fail("--rope-freq-base {}: must be a positive number", *o.freq_base);
    c.rope_base = static_cast<float>(*o.freq_base);
  }
  if (o.yarn_orig_ctx) {
    if (*o.yarn_orig_ctx <= 0) fail("--yarn-orig-ctx {}: must be positive", *o.yarn_orig_ctx);
    c.rope_orig_ctx = *o.yarn_orig_ctx;
  }
  // As llama.cpp: the overrides are the global layers' RoPE; sliding-window
  // layers keep the file's base and stretch (freq_base_swa, freq_scale_swa).
  const float file_base_local = c.rope_base_local;
  const float file_scale_local = c.rope_freq_scale_local;
  derive(c);
  if (std::find(c.layer_is_local.begin(), c.layer_is_local.end(), true) != c.layer_is_local.end()) {
    c.rope_base_local = file_base_local;
    c.rope_freq_scale_local = file_scale_local;
  } else {
    c.rope_base_local = c.rope_base;
  }
  if (o.ctx) {
    if (*o.ctx <= 0) fail("--ctx {}: must be positive", *o.ctx);
    c.n_ctx_train = *o.ctx;
  }
  const bool stretched = c.rope_scaling != RopeScalingType::kNone;
  if (c.n_ctx_train > c.n_ctx_file && !stretched) {
    warnings.push_back(
        fmt::format("context {} exceeds the {} positions the model was trained on, and its RoPE is not scaled: "
                    "expect degraded output past position {} (give --rope-scaling yarn --rope-scale N to extend it)",
                    c.n_ctx_train, c.n_ctx_file, c.n_ctx_file));
  }
  return warnings;
}

kernels::RopeScaling rope_scaling_params(const ModelConfig& c, bool local) {
  kernels::RopeScaling s;
  s.freq_scale = local ? c.rope_freq_scale_local : c.rope_freq_scale;
  s.attn_factor = c.rope_attn_factor;
  if (c.rope_scaling == RopeScalingType::kYarn) {
    s.ext_factor = c.yarn_ext_factor;
    s.orig_ctx = c.rope_orig_ctx;
    s.beta_fast = c.yarn_beta_fast;
    s.beta_slow = c.yarn_beta_slow;
  }
  return s;
}

std::string rope_summary(const ModelConfig& c) {
  std::string type = rope_scaling_name(c.rope_scaling);
  switch (c.rope_scaling) {
    case RopeScalingType::kNone: break;
    case RopeScalingType::kLinear: type += fmt::format(" x{}", c.rope_scaling_factor); break;
    case RopeScalingType::kLlama3: type += " (rope_freqs tensor)"; break;
    case RopeScalingType::kLongRope:
      type += fmt::format(" ({} factors: context {} {} original {})", rope_long_factors(c) ? "long" : "short",
                          c.n_ctx_train, rope_long_factors(c) ? ">" : "<=", c.rope_orig_ctx);
      break;
    case RopeScalingType::kYarn:
      type += fmt::format(" x{} (original context {}, ext factor {}, beta {}/{})", c.rope_scaling_factor,
                          c.rope_orig_ctx, c.yarn_ext_factor, c.yarn_beta_fast, c.yarn_beta_slow);
      break;
  }
  std::string out = fmt::format("{}, base {}", type, c.rope_base);
  if (c.rope_base_local != c.rope_base) out += fmt::format(" (local layers {})", c.rope_base_local);
  if (c.rope_attn_factor != 1.0f) out += fmt::format(", attn factor {}", c.rope_attn_factor);
  out += fmt::format(", {} of {} dims, {}", c.rope_dims, c.head_dim, c.rope_neox ? "neox" : "normal");
  return out;
}

}  // namespace tokenmill::model
