#include "quant/tensor_policy.h"

#include <fmt/format.h>

#include <charconv>

namespace tokenmill::quant {

using gguf::TensorType;

TensorRole parse_tensor_role(std::string_view name) {
  TensorRole r;
  std::string_view rest = name;
  if (rest.starts_with("blk.")) {
    rest.remove_prefix(4);
    const size_t dot = rest.find('.');
    int64_t layer = -1;
    if (dot != std::string_view::npos &&
        std::from_chars(rest.data(), rest.data() + dot, layer).ptr == rest.data() + dot) {
      r.layer = layer;
      rest.remove_prefix(dot + 1);
    } else {
      rest = name;
    }
  }
  if (rest.ends_with(".weight")) rest.remove_suffix(7);
  r.role = std::string(rest);
  return r;
}

bool use_more_bits(int64_t layer, int64_t n_layer) {
  if (layer < 0) return false;
  return layer < n_layer / 8 || layer >= 7 * n_layer / 8 || (layer - n_layer / 8) % 3 == 2;
}

TensorType fallback_type(TensorType wanted, int64_t row_length) {
  const auto fits = [&](TensorType t) { return row_length % gguf::tensor_type_info(t).block_size == 0; };
  if (fits(wanted)) return wanted;
  TensorType next = TensorType::F16;
  switch (wanted) {
    case TensorType::Q2_K:
    case TensorType::Q3_K: next = TensorType::Q4_0; break;
    case TensorType::Q4_K: next = TensorType::Q5_0; break;
    case TensorType::Q5_K: next = TensorType::Q5_1; break;
    case TensorType::Q6_K: next = TensorType::Q8_0; break;
    default: break;
  }
  return fits(next) ? next : TensorType::F16;
}

namespace {

TensorType mix_type(const QuantTarget& target, const TensorRole& role, int64_t n_layer, bool classifier) {
  if (target.mix == Mix::kNone) return target.base;
  if (classifier) return TensorType::Q6_K;
  const bool down = role.role == "ffn_down" || role.role == "ffn_down_exps" || role.role == "ffn_down_shexp";
  if ((role.role == "attn_v" || down) && use_more_bits(role.layer, n_layer)) {
    return TensorType::Q6_K;
  }
  return target.base;
}

}  // namespace

TensorChoice choose_tensor_type(const QuantTarget& target, std::string_view name, int64_t n_layer, bool classifier,
                                bool keep_output_f16, int64_t row_length) {
  TensorChoice c;
  if (classifier && keep_output_f16) {
    c.type = TensorType::F16;
    return c;
  }
  const TensorType wanted = mix_type(target, parse_tensor_role(name), n_layer, classifier);
  c.type = fallback_type(wanted, row_length);
  if (c.type != wanted) {
    c.note = fmt::format("{}: row length {} is not a multiple of the {} block size {}; stored as {}", name, row_length,
                         gguf::tensor_type_name(wanted), gguf::tensor_type_info(wanted).block_size,
                         gguf::tensor_type_name(c.type));
  }
  if (target.runtime == WeightRuntime::kFp8) {
    c.fp8_grid = row_length % 32 == 0;
    if (!c.fp8_grid) {
      c.note = fmt::format("{}: row length {} is not a multiple of the FP8 block size 32; stored as plain BF16", name,
                           row_length);
    }
  }
  return c;
}

}  // namespace tokenmill::quant
