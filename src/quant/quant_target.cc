#include "quant/quant_target.h"

#include <array>
#include <cctype>

namespace tokenmill::quant {
namespace {

using gguf::TensorType;

struct Row {
  std::string_view name;
  TensorType base;
  Mix mix;
  WeightRuntime runtime;
  uint32_t file_type;  // LLAMA_FTYPE: pure K types map to their _S variants
};

constexpr std::array<Row, 17> kTargets = {{
    {"F32", TensorType::F32, Mix::kNone, WeightRuntime::kDense, 0},
    {"F16", TensorType::F16, Mix::kNone, WeightRuntime::kDense, 1},
    {"BF16", TensorType::BF16, Mix::kNone, WeightRuntime::kDense, 32},
    {"Q8_0", TensorType::Q8_0, Mix::kNone, WeightRuntime::kDense, 7},
    {"Q4_0", TensorType::Q4_0, Mix::kNone, WeightRuntime::kDense, 2},
    {"Q4_1", TensorType::Q4_1, Mix::kNone, WeightRuntime::kDense, 3},
    {"Q5_0", TensorType::Q5_0, Mix::kNone, WeightRuntime::kDense, 8},
    {"Q5_1", TensorType::Q5_1, Mix::kNone, WeightRuntime::kDense, 9},
    {"Q2_K", TensorType::Q2_K, Mix::kNone, WeightRuntime::kDense, 10},
    {"Q3_K", TensorType::Q3_K, Mix::kNone, WeightRuntime::kDense, 11},
    {"Q4_K", TensorType::Q4_K, Mix::kNone, WeightRuntime::kDense, 14},
    {"Q5_K", TensorType::Q5_K, Mix::kNone, WeightRuntime::kDense, 16},
    {"Q6_K", TensorType::Q6_K, Mix::kNone, WeightRuntime::kDense, 18},
    {"Q4_K_M", TensorType::Q4_K, Mix::kQ4_K_M, WeightRuntime::kDense, 15},
    {"Q5_K_M", TensorType::Q5_K, Mix::kQ5_K_M, WeightRuntime::kDense, 17},
    {"FP8_E4M3", TensorType::BF16, Mix::kNone, WeightRuntime::kFp8, 32},
    {"W8A8", TensorType::Q8_0, Mix::kNone, WeightRuntime::kW8A8, 7},
}};

std::string upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

std::optional<QuantTarget> parse_quant_target(std::string_view name) {
  std::string u = upper(name);
  if (u == "FP8") u = "FP8_E4M3";
  for (const Row& r : kTargets) {
    if (r.name == u) return QuantTarget{std::string(r.name), r.base, r.mix, r.runtime, r.file_type};
  }
  return std::nullopt;
}

std::string quant_target_choices() {
  std::string out;
  for (const Row& r : kTargets) {
    if (!out.empty()) out += '|';
    out += r.name;
  }
  return out;
}

std::string_view runtime_name(WeightRuntime runtime) {
  switch (runtime) {
    case WeightRuntime::kDense: return "dense";
    case WeightRuntime::kFp8: return "fp8_e4m3";
    case WeightRuntime::kW8A8: return "w8a8";
  }
  return "dense";
}

std::optional<WeightRuntime> runtime_from_name(std::string_view name) {
  for (WeightRuntime r : {WeightRuntime::kDense, WeightRuntime::kFp8, WeightRuntime::kW8A8}) {
    if (runtime_name(r) == name) return r;
  }
  return std::nullopt;
}

}  // namespace tokenmill::quant
