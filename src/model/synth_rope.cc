#include "model/synth_rope.h"

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <numbers>
#include <string>
#include <vector>

#include "util/check.h"
#include "util/error.h"

namespace tokenmill::model {
namespace {

using gguf::Value;

// Llama 3.1's published rope_scaling parameters besides the factor.
constexpr double kLlama3LowFreqFactor = 1.0;
constexpr double kLlama3HighFreqFactor = 4.0;

double number_or(const gguf::GgufWriter& w, const std::string& key, double fallback) {
  const Value* v = w.find(key);
  return v != nullptr ? v->as_float() : fallback;
}

// Llama 3.1: wavelengths shorter than old_ctx / high_freq_factor keep their
// frequency, longer than old_ctx / low_freq_factor are divided by the
// factor, and those between blend smoothly. Returns the divisors.
std::vector<float> llama3_factors(int64_t rope_dims, double base, double factor, double old_ctx) {
  const double low_wavelen = old_ctx / kLlama3LowFreqFactor;
  const double high_wavelen = old_ctx / kLlama3HighFreqFactor;
  std::vector<float> out;
  for (int64_t i = 0; i < rope_dims / 2; ++i) {
    const double freq = std::pow(base, -2.0 * static_cast<double>(i) / static_cast<double>(rope_dims));
    const double wavelen = 2.0 * std::numbers::pi / freq;
    double divisor = 1.0;
    if (wavelen > low_wavelen) {
      divisor = factor;
    } else if (wavelen >= high_wavelen) {
      const double smooth = (old_ctx / wavelen - kLlama3LowFreqFactor) / (kLlama3HighFreqFactor - kLlama3LowFreqFactor);
      divisor = 1.0 / ((1.0 - smooth) / factor + smooth);
    }
    out.push_back(static_cast<float>(divisor));
  }
  return out;
}

// Adds an F32 vector tensor.
void add_f32(gguf::GgufWriter& w, const std::string& name, const std::vector<float>& values) {
  std::vector<uint8_t> bytes(values.size() * sizeof(float));
  std::memcpy(bytes.data(), values.data(), bytes.size());
  w.add_tensor(name, gguf::TensorType::F32, {static_cast<int64_t>(values.size())}, std::move(bytes));
}

// Divisors rising geometrically from 1 (the fastest pair) to `top` (the
// slowest), the shape of Phi-3's fitted LongRoPE factors.
std::vector<float> geometric_factors(int64_t rope_dims, double top) {
  std::vector<float> out;
  const int64_t n = rope_dims / 2;
  for (int64_t i = 0; i < n; ++i)
    out.push_back(static_cast<float>(std::pow(top, n > 1 ? static_cast<double>(i) / (n - 1) : 0.0)));
  return out;
}

// The head's rotated dims as the writer's keys say.
int64_t rope_dims_of(const gguf::GgufWriter& w, const std::string& a) {
  if (const Value* dims = w.find(a + ".rope.dimension_count")) return dims->as_int();
  return static_cast<int64_t>(
      number_or(w, a + ".attention.key_length",
                number_or(w, a + ".embedding_length", 0) / number_or(w, a + ".attention.head_count", 1)));
}

}  // namespace

void add_synth_rope_scaling(gguf::GgufWriter& w, const SynthRope& r) {
  if (r.type == RopeScalingType::kNone) return;
  const Value* arch_value = w.find("general.architecture");
  TM_CHECK(arch_value != nullptr);
  const std::string a = arch_value->as_string();
  if (!(r.factor > 0.0) || !std::isfinite(r.factor)) fail("--rope-factor {}: must be a positive number", r.factor);
  if (!(r.attn_factor > 0.0)) fail("--rope-attn-factor {}: must be a positive number", r.attn_factor);
  const int64_t ctx = static_cast<int64_t>(number_or(w, a + ".context_length", 0));
  const int64_t orig_ctx = r.orig_ctx > 0 ? r.orig_ctx : ctx;
  if (orig_ctx <= 0) fail("--rope-orig-ctx {}: must be positive", r.orig_ctx);
  auto f32 = [&](const char* key, double v) { w.set(fmt::format("{}.{}", a, key), Value::f32(static_cast<float>(v))); };
  if (r.attn_factor != 1.0) f32("rope.scaling.attn_factor", r.attn_factor);

  switch (r.type) {
    case RopeScalingType::kNone: break;
    case RopeScalingType::kLinear:
      w.set(a + ".rope.scaling.type", Value::str("linear"));
      f32("rope.scaling.factor", r.factor);
      break;
    case RopeScalingType::kYarn:
      w.set(a + ".rope.scaling.type", Value::str("yarn"));
      f32("rope.scaling.factor", r.factor);
      w.set(a + ".rope.scaling.original_context_length", Value::u32(static_cast<uint32_t>(orig_ctx)));
      break;
    case RopeScalingType::kLlama3: {
      const double base = number_or(w, a + ".rope.freq_base", 10000.0);
      add_f32(w, "rope_freqs.weight",
              llama3_factors(rope_dims_of(w, a), base, r.factor, static_cast<double>(orig_ctx)));
      break;
    }
    case RopeScalingType::kLongRope: {
      // llama.cpp reads the two tensors for phi3 only.
      if (a != "phi3") fail("--rope-scaling longrope: phi3's scaling, not {}'s", a);
      w.set(a + ".rope.scaling.original_context_length", Value::u32(static_cast<uint32_t>(orig_ctx)));
      // Phi-3's conversion stores sqrt(1 + ln(ctx / orig) / ln(orig)).
      if (r.attn_factor == 1.0 && ctx > orig_ctx)
        f32("rope.scaling.attn_factor",
            std::sqrt(1.0 + std::log(static_cast<double>(ctx) / orig_ctx) / std::log(static_cast<double>(orig_ctx))));
      add_f32(w, "rope_factors_long.weight", geometric_factors(rope_dims_of(w, a), r.factor));
      add_f32(w, "rope_factors_short.weight", geometric_factors(rope_dims_of(w, a), 1.0 + 0.1 * r.factor));
      break;
    }
  }
}

}  // namespace tokenmill::model
