#include "model/synth_lora.h"

#include <algorithm>
#include <cmath>

#include "kernels/matmul.h"
#include "model/model_shapes.h"
#include "model/synth_random.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace tokenmill::model {
namespace {

// "blk.N.ROLE.weight" -> ROLE, "output.weight" -> "output", else "".
std::string role_of(const std::string& name) {
  if (name == "output.weight") return "output";
  if (!name.starts_with("blk.") || !name.ends_with(".weight")) return "";
  const size_t dot = name.find('.', 4);
  if (dot == std::string::npos) return "";
  return name.substr(dot + 1, name.size() - dot - 1 - 7);
}

// Root mean square of a sample of the base matrix's rows (dequantized).
double rms_of(const gguf::TensorInfo& t) {
  const kernels::WeightView w{t.type, t.data, t.num_rows(), t.row_length(), nullptr};
  const int64_t rows = std::min<int64_t>(w.rows, 64);
  std::vector<float> row(static_cast<size_t>(w.cols));
  double sum = 0;
  for (int64_t i = 0; i < rows; ++i) {
    kernels::dequantize_weight_row(w, i * (w.rows / rows), row.data());
    for (float v : row) sum += static_cast<double>(v) * v;
  }
  return std::sqrt(sum / static_cast<double>(rows * w.cols));
}

void check_type(gguf::TensorType type, int64_t row_length, const std::string& what) {
  const int64_t block = gguf::tensor_type_info(type).block_size;
  if (row_length % block != 0)
    fail("synth-lora: {} rows hold {} elements, not a multiple of {}'s blocks of {}", what, row_length,
         gguf::tensor_type_name(type), block);
}

}  // namespace

const std::vector<std::string>& synth_lora_roles() {
  static const std::vector<std::string> roles = {"attn_q",   "attn_k", "attn_v",   "attn_qkv", "attn_output",
                                                 "ffn_gate", "ffn_up", "ffn_down", "output"};
  return roles;
}

gguf::GgufWriter build_synth_lora(const gguf::GgufFile& base, const SynthLoraOptions& o) {
  if (o.rank < 1) fail("synth-lora: --rank must be >= 1, got {}", o.rank);
  if (!std::isfinite(o.alpha) || !std::isfinite(o.strength) || o.strength < 0)
    fail("synth-lora: --alpha must be finite and --strength finite and >= 0");
  const std::vector<std::string>& roles = synth_lora_roles();
  for (const std::string& r : o.targets)
    if (std::find(roles.begin(), roles.end(), r) == roles.end())
      fail(
          "synth-lora: unknown target '{}' (one of attn_q, attn_k, attn_v, attn_qkv, attn_output, ffn_gate, ffn_up, "
          "ffn_down, output)",
          r);
  const auto wanted = [&](const std::string& role) {
    if (role.empty()) return false;
    if (o.targets.empty()) return role != "output" && std::find(roles.begin(), roles.end(), role) != roles.end();
    return std::find(o.targets.begin(), o.targets.end(), role) != o.targets.end();
  };

  gguf::GgufWriter w;
  w.set("general.architecture", gguf::Value::str(base.get_string("general.architecture")));
  w.set("general.type", gguf::Value::str("adapter"));
  w.set("general.name", gguf::Value::str("tokenmill synthetic LoRA"));
  w.set("adapter.type", gguf::Value::str("lora"));
  w.set("adapter.lora.alpha", gguf::Value::f32(o.alpha));

  const float scale = o.alpha != 0.0f ? o.alpha / static_cast<float>(o.rank) : 1.0f;
  ThreadPool pool(0);
  std::vector<std::string> adapted_roles;
  const uint64_t seed = mix64(o.seed);
  for (const gguf::TensorInfo& t : base.tensors()) {
    const std::string role = role_of(t.name);
    if (!wanted(role) || t.num_dims != 2) continue;
    adapted_roles.push_back(role);
    const int64_t n_in = t.row_length();
    const int64_t n_out = t.num_rows();
    check_type(o.type, n_in, t.name + ".lora_a");
    check_type(o.type, o.rank, t.name + ".lora_b");
    // A x has entries of the size of x's RMS; B is sized so the delta's
    // outputs are `strength` times the base product's (docs in the header).
    const float std_a = 1.0f / std::sqrt(static_cast<float>(n_in));
    const float std_b = static_cast<float>(o.strength * std::sqrt(static_cast<double>(n_in)) * rms_of(t) /
                                           (std::abs(scale) * std::sqrt(static_cast<double>(o.rank))));
    const uint64_t seed_a = mix64(seed ^ fnv1a(t.name + ".lora_a"));
    const uint64_t seed_b = mix64(seed ^ fnv1a(t.name + ".lora_b"));
    w.add_tensor(t.name + ".lora_a", o.type, {n_in, o.rank},
                 encode_rows(
                     o.type, o.rank, n_in,
                     [&](int64_t row, std::span<float> out) { fill_normal(seed_a, row, 0.0f, std_a, out); }, pool));
    w.add_tensor(t.name + ".lora_b", o.type, {o.rank, n_out},
                 encode_rows(
                     o.type, n_out, o.rank,
                     [&](int64_t row, std::span<float> out) { fill_normal(seed_b, row, 0.0f, std_b, out); }, pool));
  }
  for (const std::string& r : o.targets)
    if (std::find(adapted_roles.begin(), adapted_roles.end(), r) == adapted_roles.end())
      fail("synth-lora: the base model '{}' has no '{}' tensors", base.name(), r);
  if (adapted_roles.empty()) fail("synth-lora: the base model '{}' has no linear layers to adapt", base.name());
  return w;
}

}  // namespace tokenmill::model
